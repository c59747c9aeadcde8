"""`boxjax bench report`: docs/benchmarks.md's tables and README's headline figures, written from the rows.

    boxjax bench report              # rewrite every marked block of README.md and docs/benchmarks.md
    boxjax bench report --check      # write nothing; exit 1 naming each block that differs from the rows
    boxjax bench report --show NAME  # one block on stdout

A block is the text between the lines `<!-- report:NAME -->` and `<!-- /report -->` of a document: this tool
writes it from `results/bench/*.jsonl` (and the metrics files under `results/logs/` that `BAND` and `ALIKE`
name), the prose around it is kept by hand. Blocks (`blocks`):

* ``seed-table``: the seed's blocking table, the current default per question and the named options
  (`seed_table.current`), each with its commit, machine and date;
* ``seed-earlier``: every other measurement of it (superseded, reverted, removed, diagnostic);
* ``solve-table``: the stance's time and cost per solve in the seed's table form (`solve_report.cost_table`);
* ``alike`` and ``alike-pair``: the training-alike check, return, falls and punch outcomes of a run's first
  iterations by thirds (as `learn_report` weighs them), the GPU runs of the seed's world as one band;
* ``headline``: README's "What it does best" paragraph, from the newest bench of the default and the named
  options whose cost is below the seed's.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import os
import re
import textwrap
from collections.abc import Callable

from boxjax import runs
from boxjax.bench import learn_report, seed_table, solve_report
from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

DOCS = ("README.md", os.path.join("docs", "benchmarks.md"))
"""The documents `boxjax bench report` writes, relative to the checkout."""
MARKER = re.compile(r"^<!-- report:([a-z-]+) -->\n(.*?)^<!-- /report -->$", re.S | re.M)
"""A block: its name, then its text up to the closing marker (each marker a line of its own)."""
OPENING = re.compile(r"^<!-- report:[a-z-]+ -->$", re.M)


@dataclasses.dataclass(frozen=True)
class Run:
    """A training run whose kept metrics the alike tables read."""

    label: str
    metrics: str
    """The metrics file, under results/logs/."""
    commit: str
    machine: str
    date: str = "2026-12-06"


H100 = "NVIDIA H100 80GB HBM3"
BAND = (
    Run("seed 0", "block-seedtable-seedrun-base-h100-2026-12-06.jsonl.gz", "9bfd822", H100),
    Run("seed 0", "block-seedtable-seedrun-default-h100-2026-12-06.jsonl.gz", "2fdc10f", H100),
    Run("seed 0", "block-issue41-fusedall-seed0-h100-2026-12-06.jsonl.gz", "2d4782e", H100),
    Run("seed 1", "block-issue41-fusedall-seed1-shared-h100-2026-12-06.jsonl.gz", "2d4782e", H100),
    Run("seed 1", "block-issue41-default-seed1-shared-7a824c2-h100-2026-12-06.jsonl.gz", "7a824c2", H100),
    Run("seed 0", "block-seedtable-seedrun-default-seed0-71df9cd-h100-2026-12-06.jsonl.gz", "71df9cd", H100),
    Run("seed 1", "block-seedtable-seedrun-default-seed1-71df9cd-h100-2026-12-06.jsonl.gz", "71df9cd", H100),
)
"""The GPU runs of the seed's world from the shipped blocker (Newton, every hinge of the opponent simulated,
2,048 x 16): the band the other runs are read against."""
CPU16 = "Intel Xeon, 16 cores of the H100 machine"
CPU2 = "x86-64, 2 cores"
PAIR = (
    Run(
        "GPU, **before** the speed work, seed 0 (15 minutes beside the next row on one card)",
        "block-seedtable-seedpair-before-9bfd822-seed0-shared-h100-2026-12-06.jsonl.gz",
        "9bfd822",
        H100,
    ),
    Run(
        "GPU, **after** (the default), seed 0 (beside the row above)",
        "block-seedtable-seedpair-after-3cf9ade-seed0-shared-h100-2026-12-06.jsonl.gz",
        "3cf9ade",
        H100,
    ),
)
"""Item 4's pair: the code before the speed work and the default after it, side by side for 15 minutes."""
ALIKE = (
    Run("**CPU path**, decoupled, 1,920 worlds, seed 0",
        "block-seedtable-seedcpu-fixed-h100-2026-12-06.jsonl.gz", "0e1f08a", CPU16),
    Run("CPU path, serial, 1,920 worlds, seed 0", "block-cpu-serial-muscular-2core-2026-12-06.jsonl.gz",
        "b8cca53", CPU2),
    Run("CPU path, serial, **2,048 worlds** as the GPU's, seed 0",
        "block-cpu-serial-2048-muscular-2core-5fb5ae6-2026-12-06.jsonl.gz", "5fb5ae6", CPU2),
    Run("GPU, the default, seed 0", "block-seedtable-seedrun-default-seed0-5fb5ae6-h100-2026-12-06.jsonl.gz",
        "5fb5ae6", H100),
    *PAIR,
    Run("GPU, named option `--solver-loop unrolled` (same physics), seed 0",
        "block-seedtable-seedrun-unrolled-seed0-371a988-h100-2026-12-06.jsonl.gz", "371a988", H100),
    Run("GPU, `--solver-loop unrolled` with every matmul in float32 (`JAX_DEFAULT_MATMUL_PRECISION=highest`)",
        "block-seedtable-seedrun-fp32-unrolled-seed0-371a988-h100-2026-12-06.jsonl.gz", "371a988", H100),
    Run("GPU, named option `--env solver_iterations=2` (physics changed), seed 0",
        "block-issue41-cap2-seed0-shared-h100-2026-12-06.jsonl.gz", "7a824c2", H100),
    Run("GPU, named option `--env solver=cg` (physics changed), seed 0",
        "block-issue41-cg-fusedall-seed0-shared-h100-2026-12-06.jsonl.gz", "2d4782e", H100),
    Run("GPU, named option `--env opponent_freeze_idle=true` (lighter world), seed 0",
        "block-seedtable-seedrun-muscular-h100-2026-12-06.jsonl.gz", "b4f713b", H100),
)  # fmt: skip
"""The runs read against the band, each from the shipped muscular blocker."""
ALIKE_ITERATIONS = 246
"""The first iterations the alike table reads (the CPU path's shortest kept run)."""
PAIR_ITERATIONS = 829
"""The first iterations the pair's table reads (the slower run's length)."""
FIGURES = ("return", "falls", "blocked", "missed", "hit")


def root() -> str:
    """The checkout whose results/ and documents the report reads and writes."""
    return bench_rows.REPO


def thirds(metrics: list[dict], iterations: int) -> list[dict[str, float]]:
    """`FIGURES` of the first `iterations` by thirds (`learn_report.windows`): the return and the falls (%)
    of the episodes that ended, weighted by the episodes each iteration ended; the shares (%) of the punches
    that arrived that were blocked, missed or hit."""
    out = []
    for window in learn_report.windows(metrics[:iterations], 3):

        def total(key: str, rows: list[dict] = window) -> float:
            return sum(r.get(key, 0.0) for r in rows)

        ended = total("episode/count")
        arrived = total("env/punch/arrived")
        figures = {
            "return": sum(r.get("episode/return", 0.0) * r.get("episode/count", 0.0) for r in window) / ended,
            "falls": 100
            * sum(r.get("episode/fall_rate", 0.0) * r.get("episode/count", 0.0) for r in window)
            / ended,
        }
        figures.update({k: 100 * total(f"env/punch/{k}") / arrived for k in FIGURES[2:]})
        out.append(figures)
    return out


@functools.cache
def run_thirds(path: str, iterations: int) -> tuple[dict[str, float], ...]:
    """`thirds` of the metrics file at `path`."""
    return tuple(thirds(runs.read_metrics(path), iterations))


def _cells(figures: list[list[dict[str, float]]]) -> list[str]:
    """One cell per figure, its thirds "a / b / c"; a range "lo–hi" per third where several runs are given."""
    cells = []
    for name in FIGURES:
        digits = 1 if name == "falls" else 0
        unit = "" if name == "return" else " %"
        parts = []
        for third in range(3):
            values = sorted(run[third][name] for run in figures)
            lo, hi = (f"{v:.{digits}f}" for v in (values[0], values[-1]))
            parts.append(lo if lo == hi else f"{lo}–{hi}")
        cells.append(" / ".join(parts) + unit)
    return cells


def alike_table(band: tuple[Run, ...], others: tuple[Run, ...], iterations: int) -> str:
    """The alike check as a markdown table: the band (its range), then each other run, each line with its
    commits, machine, date and metrics file."""
    logs = os.path.join(root(), "results", "logs")

    def figures(run: Run) -> list[dict[str, float]]:
        return list(run_thirds(os.path.join(logs, run.metrics), iterations))

    head = "| run | commit | machine | " + " | ".join(FIGURES) + " | metrics (results/logs/) |"
    lines = [head, "|" + "---|" * (len(FIGURES) + 4)]
    if band:
        commits = ", ".join(dict.fromkeys(r.commit for r in band))
        label = f"GPU, the seed's world, {len(band)} runs (**the band**; seeds 0 and 1)"
        files = ", ".join(f"`{r.metrics}`" for r in band)
        cells = " | ".join(_cells([figures(r) for r in band]))
        lines.append(f"| {label} | {commits} | {band[0].machine} | {cells} | {files} |")
    for run in others:
        cells = " | ".join(_cells([figures(run)]))
        lines.append(f"| {run.label} | {run.commit} | {run.machine} | {cells} | `{run.metrics}` |")
    return "\n".join(lines)


def _plain(change: str) -> str:
    """A `seed_table.changes_of` note without its bold label ("**physics changed**: the CG solver" -> "the
    CG solver")."""
    return change.split(": ", 1)[-1]


def headline(rows: list[dict], prices: dict[str, bench_rows.Price]) -> str:
    """README's "What it does best" paragraph: the newest bench of the default in the seed's world against the
    seed's RTX 5090 (seconds and dollars per 1,000 iterations), and the physics-changing named options benched
    on the same machine whose dollars are below the seed's.

    Raises:
      ValueError: no bench of the default, or no price for its machine.
    """
    shown = [e for e in seed_table.current(seed_table.measurements(rows)) if e["kind"] == "bench"]
    defaults = [e for e in shown if not e["options"]]
    if not defaults:
        raise ValueError("no bench row of the default in the seed's world")
    default = max(defaults, key=lambda e: e["stamp"])
    entry = bench_rows.price_entry(default["device"], prices, None)
    if entry is None:
        raise ValueError(f"no price for {default['device']}")
    card, usd = entry[0].split(" ")[0], entry[1].usd_per_hour
    seed = seed_table.SEED_ROWS[0]
    s = default.get("s_per_iteration_median", default["s_per_iteration"])
    cost = seed_table.usd_per_1k(s, usd)
    dear = "though" if cost > seed["usd_per_1k"] else "and"
    text = (
        f"What it does best: the seed's two-fighter blocking iteration (32,768 steps) takes {s:.3f} s on one "
        f"{card} in the seed's own world (the default; bench median, {default['commit']}, {default['date']}) "
        f"against the seed's {seed['s_per_iteration']:.2f} s on an RTX 5090: "
        f"{seed['s_per_iteration'] / s:.1f} times its speed, {dear} at ${usd:.2f}/h that is ${cost:.3f} per "
        f"1,000 iterations against its ${seed['usd_per_1k']:.2f}."
    )
    cheaper = []
    for e in shown:
        s_option = e.get("s_per_iteration_median", e["s_per_iteration"])
        option_cost = seed_table.usd_per_1k(s_option, usd)
        if e["changes"] and e["device"] == default["device"] and option_cost < seed["usd_per_1k"]:
            flags = " ".join(f"`{f}`" for f in e["options"])
            what = "; ".join(_plain(c) for c in e["changes"])
            item = f"{what} ({flags}) {s_option:.3f} s, ${option_cost:.3f} ({e['commit']})"
            cheaper.append((option_cost, item))
    if cheaper:
        listed = "; ".join(item for _, item in sorted(cheaper))
        text += (
            f" Named options that change the physics, off by default, go below the seed's price: {listed}."
        )
    text += " `docs/benchmarks.md` holds every figure with its command, device, commit and date."
    return textwrap.fill(text, width=110, break_long_words=False, break_on_hyphens=False)


def bench_rows_of(base: str) -> list[dict]:
    """Every row of `base`/results/bench/*.jsonl."""
    return seed_table.read_rows(sorted(glob.glob(os.path.join(base, "results", "bench", "*.jsonl"))))


def blocks(base: str | None = None) -> dict[str, Callable[[], str]]:
    """{block name: its text, computed when called} from the rows under `base` (the checkout)."""
    base = base or root()
    prices = bench_rows.load_prices()
    rows = functools.cache(lambda: bench_rows_of(base))
    solves = os.path.join(base, "results", "bench", "solve-*.jsonl")
    return {
        "seed-table": lambda: seed_table.table(rows(), prices),
        "seed-earlier": lambda: seed_table.earlier_table(rows(), prices),
        "solve-table": lambda: solve_report.cost_table(
            solve_report.read_solves(sorted(glob.glob(solves))), prices
        ),
        "alike": lambda: alike_table(BAND, ALIKE, ALIKE_ITERATIONS),
        "alike-pair": lambda: alike_table((), PAIR, PAIR_ITERATIONS),
        "headline": lambda: headline(rows(), prices),
    }


def fill(text: str, texts: dict[str, Callable[[], str]]) -> str:
    """`text` with every block's text between its markers replaced by `texts[name]()`.

    Raises:
      ValueError: a marker of an unknown block, or one not closed.
    """
    if len(OPENING.findall(text)) != len(MARKER.findall(text)):
        raise ValueError("a `<!-- report:NAME -->` marker without its `<!-- /report -->`")

    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in texts:
            raise ValueError(f"unknown report block {name!r}; valid: {', '.join(texts)}")
        return f"<!-- report:{name} -->\n{texts[name]().rstrip()}\n<!-- /report -->"

    return MARKER.sub(one, text)


def stale(text: str, texts: dict[str, Callable[[], str]]) -> list[str]:
    """The names of the blocks of `text` whose text differs from the report's."""
    filled = dict(MARKER.findall(fill(text, texts)))
    return [name for name, body in MARKER.findall(text) if body != filled[name]]


def main(argv: list[str] | None = None) -> int:
    """Write the blocks of the documents, check them (`--check`) or show one (`--show`)."""
    p = bench_rows.parser(__doc__.split("\n")[0], "report")
    p.add_argument("files", nargs="*", help=f"documents (default: {', '.join(DOCS)} of this checkout)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a block differs")
    p.add_argument("--show", metavar="NAME", default=None, help="print one block and stop")
    bench_rows.add_common_args(p)
    args = p.parse_args(argv)
    texts = blocks()
    if args.show:
        if args.show not in texts:
            p.error(f"--show {args.show!r}: valid blocks are {', '.join(texts)}")
        print(texts[args.show]())
        return 0
    behind = []
    for path in args.files or [os.path.join(root(), doc) for doc in DOCS]:
        with open(path) as f:
            text = f.read()
        if args.check:
            behind += [f"{path}: {name}" for name in stale(text, texts)]
            continue
        new = fill(text, texts)
        if new != text:
            with open(path, "w") as f:
                f.write(new)
            print(f"{path}: written")
    if behind:
        print("behind the rows (run `boxjax bench report`):\n  " + "\n  ".join(behind))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
