"""Stance solves on the seed's terms: cost per solve in the seed's table form, and the worlds sweep.

    python experiments/solve_report.py [ROWS.jsonl ...] [--plot solve-sweep.png] [--price KEY]
    python -m boxjax.bench.solve_report ...                      # the same

Reads the solve rows that `run_report.py --rows` writes (default: every `results/bench/solve-*.jsonl`),
one run each (device, body, worlds, unroll, rule, caches, seed, commit), and prints the seed's table: machine,
body, price, time to solve, cost, and the commits and dates measured. A line holds the runs of one device,
body, worlds, unroll, rule and caches; the time to solve counts from the process start, set-up included (the
seed's figure), the mean over its seeds with each seed's in brackets; the cost is that time at the device's
price from `prices.json` (`--price` names the entry; else it is matched by name), whose source and date are
printed under the table.

With `--plot`, the seed's Figure 2: time to solve against the copies of the world (worlds), one line per
body, rule, caches and unroll through the mean of each world count, a point per run.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import statistics

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

DEFAULT_ROWS = os.path.join("results", "bench", "solve-*.jsonl")


@dataclasses.dataclass(frozen=True)
class Solve:
    """One solved run, from its solve rows."""

    device: str
    body: str
    worlds: int
    unroll: int
    rule: str
    caches: str
    seed: int
    commit: str
    time_to_solve_s: float
    """Process start to the solve, set-up included."""
    date: str = ""
    """When the run started (the row's date, YYYY-MM-DD)."""

    @property
    def group(self) -> tuple[str, str, int, int, str, str]:
        """What a table line holds runs of: (device, body, worlds, unroll, rule, caches)."""
        return self.device, self.body, self.worlds, self.unroll, self.rule, self.caches


def read_solves(paths: list[str]) -> list[Solve]:
    """The solved runs in the JSON Lines files `paths` (their `time_to_solve_s` rows; other rows and
    other benchmarks are skipped)."""
    solves = []
    for path in paths:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        for row in rows:
            if row.get("bench") != "solve" or row.get("metric") != "time_to_solve_s":
                continue
            solves.append(
                Solve(
                    device=row["device"],
                    body=row["body"],
                    worlds=int(row["worlds"]),
                    unroll=int(row.get("unroll", 0)),
                    rule=row["rule"],
                    caches=row["caches"],
                    seed=int(row["seed"]),
                    commit=row["commit"],
                    time_to_solve_s=float(row["value"]),
                    date=row.get("date", "")[:10],
                )
            )
    return solves


SEED_SOLVES = (
    ("RTX 5090, vast.ai (the seed's fastest)", "muscular-fast", 0.69, 377.0, 0.089),
    ("RTX 5090, vast.ai (the seed's fastest)", "simple", 0.69, 185.0, 0.053),
    ("RTX 5080, vast.ai (the seed's cheapest, muscular-fast)", "muscular-fast", 0.39, 515.0, 0.065),
    ("RTX 3090, vast.ai (the seed's cheapest, simple)", "simple", 0.20, 451.0, 0.030),
    ("c8a.24xlarge spot, 96 vCPU (the seed)", "muscular-fast", 1.34, 714.0, 0.299),
    ("c8a.24xlarge spot, 96 vCPU (the seed)", "simple", 1.34, 404.0, 0.184),
)
"""(machine, body, $/h, time to solve s, $ per solve) as the seed's stance table prints them ("cost per solve
with set-up included", 2,048-copy RTX runs and 72 x 6 CPU workers). The RTX 5090 is at the table's $0.69/h:
its dollar figures are the solve times plus about 90 s of set-up at that rate (as for every GPU of the table),
where the $0.74/h its text names for the first RTX 5090 rented would leave 56-73 s."""


def cost_table(solves: list[Solve], prices: dict[str, bench_rows.Price], key: str | None = None) -> str:
    """The seed's table (markdown), one line per `Solve.group`, then the source and date of each price
    used; a device without a price gets "n/a"."""
    groups: dict[tuple, list[Solve]] = {}
    for solve in solves:
        groups.setdefault(solve.group, []).append(solve)
    lines = [
        "| machine | body | worlds x unroll | rule | caches | price | time to solve (seeds) | cost "
        "| measured |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for machine, body, usd, seconds, cost in SEED_SOLVES:
        cells = f"| {machine} | {body} | – | seed | as the seed's | ${usd:.2f}/h"
        lines.append(f"{cells} | {seconds:.0f} s | ${cost:.3f} | the seed's table |")
    used = {}
    for (device, body, worlds, unroll, rule, caches), runs in sorted(groups.items()):
        runs = sorted(runs, key=lambda s: s.seed)
        mean_s = statistics.fmean(s.time_to_solve_s for s in runs)
        each = ", ".join(f"seed {s.seed}: {s.time_to_solve_s:.1f} s" for s in runs)
        entry = bench_rows.price_entry(device, prices, key)
        if entry is None:
            price, cost = "n/a", "n/a"
        else:
            used[entry[0]] = entry[1]
            price = f"${entry[1].usd_per_hour:.2f}/h"
            cost = f"${mean_s / 3600 * entry[1].usd_per_hour:.3f}"
        measured = ", ".join(sorted({f"{s.commit[:7]}, {s.date}" for s in runs}))
        lines.append(
            f"| {device} | {body} | {worlds} x {unroll} | {rule} | {caches} | {price} | "
            f"**{mean_s:.1f} s** ({each}) | {cost} | {measured} |"
        )
    for name, p in used.items():
        lines.append(f"\nprice '{name}': ${p.usd_per_hour:.2f}/h, {p.source}; {p.date}")
    return "\n".join(lines)


def sweep_lines(solves: list[Solve]) -> dict[str, list[tuple[int, float, list[float]]]]:
    """{label: [(worlds, mean time to solve s, each run's s)] by worlds}, one label per device, body, rule,
    caches and unroll (the seed's Figure 2 has one line per body)."""
    lines: dict[str, dict[int, list[float]]] = {}
    for s in solves:
        label = f"{s.body}, {s.rule} rule, {s.caches}, x{s.unroll} ({s.device})"
        lines.setdefault(label, {}).setdefault(s.worlds, []).append(s.time_to_solve_s)
    return {
        label: [(w, statistics.fmean(ts), ts) for w, ts in sorted(by_worlds.items())]
        for label, by_worlds in sorted(lines.items())
    }


def draw_sweep(solves: list[Solve], out: str) -> str:
    """Time to solve against worlds (`sweep_lines`) into the PNG `out`; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, points in sweep_lines(solves).items():
        worlds = [w for w, _, _ in points]
        line = ax.plot(worlds, [m for _, m, _ in points], marker="o", label=label)[0]
        for w, _, each in points:
            ax.scatter([w] * len(each), each, color=line.get_color(), s=12, alpha=0.5)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({s.worlds for s in solves}))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("copies of the world (worlds)")
    ax.set_ylabel("time to solve, set-up included (s)")
    ax.set_title("Stance: time to solve against copies of the world")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the cost table of the solve rows; draw the sweep with `--plot`."""
    p = bench_rows.parser(__doc__, "solve_report")
    p.add_argument("rows", nargs="*", help=f"solve rows (JSON Lines; default {DEFAULT_ROWS})")
    p.add_argument("--plot", default=None, help="write the worlds sweep to this PNG")
    p.add_argument("--price", default=None, help="price key in prices.json for every device")
    p.add_argument("--prices", default=None, help="prices file (default boxjax/bench/prices.json)")
    bench_rows.add_common_args(p)
    args = p.parse_args(argv)
    paths = args.rows or sorted(glob.glob(DEFAULT_ROWS))
    solves = read_solves(paths)
    if not solves:
        p.error(f"no solve rows in {', '.join(paths) or DEFAULT_ROWS}")
    prices = bench_rows.load_prices(args.prices)
    if args.price is not None and args.price not in prices:
        p.error(f"--price {args.price!r}: not in the prices file; entries: {', '.join(prices)}")
    print(cost_table(solves, prices, args.price))
    if args.plot:
        print(f"sweep -> {draw_sweep(solves, args.plot)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
