"""Block learning check at a glance: `python experiments/learn_report.py runs/NAME [...] [--windows 6]
[--iterations N]`.

For each block run a markdown table over windows of iterations: the return and the falls of the episodes that
ended in the window (weighted by the episodes each iteration ended: an iteration where none ended reports a
return of 0 and weighs nothing), episodes ended per iteration, then means within each window: punches arrived
per iteration, the success counts per iteration (goals, commands held, recoveries, bag hits,
blocks), the outcome shares of arriving punches (blocked, of them parried by a touch of the guard; missed;
hit, of them clean), the mean score of the hits (how much got through), the parried share of the punches
that reached the fighter (parried over parried plus hit: the block skill itself, which standing out of
reach does not raise) and the distillation loss. Reads runs/NAME/metrics.jsonl (or .gz), written by
experiments/block.py.
"""

from __future__ import annotations

from boxjax import runs
from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

ENDED = (
    ("return", "episode/return", "{:.0f}"),
    ("falls", "episode/fall_rate", "{:.1%}"),
)
"""(header, metric, format) of the per-episode figures, averaged over the window's ended episodes."""
COLUMNS = (
    ("episodes", "episode/count", "{:.1f}"),
    ("punches", "count/punches", "{:.0f}"),
    ("goals", "count/goals", "{:.1f}"),
    ("commands held", "count/commands_held", "{:.1f}"),
    ("recoveries", "count/recoveries", "{:.1f}"),
    ("bag hits", "count/bag_hits", "{:.1f}"),
    ("blocks", "count/blocks", "{:.1f}"),
)
"""(header, metric, format) of the per-window means."""
SHARES = ("blocked", "parried", "missed", "hit", "clean")
"""Outcomes shown as shares of arriving punches (`env/punch/<outcome>` over `env/punch/arrived`)."""


def windows(rows: list[dict], count: int) -> list[list[dict]]:
    """`rows` cut into at most `count` consecutive windows of (nearly) equal length, none empty."""
    count = max(1, min(count, len(rows)))
    bounds = [round(i * len(rows) / count) for i in range(count + 1)]
    return [rows[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def window_cells(window: list[dict]) -> list[str]:
    """One table row's cells for a window of iteration rows."""

    def mean(key: str) -> float:
        return sum(r.get(key, 0.0) for r in window) / len(window)

    span = f"{int(window[0]['iteration'])}–{int(window[-1]['iteration'])}"
    ended = sum(r.get("episode/count", 0.0) for r in window)
    per_episode = [
        fmt.format(sum(r.get(key, 0.0) * r.get("episode/count", 0.0) for r in window) / ended)
        if ended
        else "–"
        for _, key, fmt in ENDED
    ]
    cells = [span, *per_episode] + [fmt.format(mean(key)) for _, key, fmt in COLUMNS]
    arrived = mean("env/punch/arrived")
    cells += [f"{mean(f'env/punch/{k}') / arrived:.0%}" if arrived > 0 else "–" for k in SHARES]
    hits = mean("env/punch/hit")
    cells.append(f"{mean('env/punch/hit_score') / hits:.2f}" if hits > 0 else "–")
    reached = mean("env/punch/parried") + mean("env/punch/hit")
    cells.append(f"{mean('env/punch/parried') / reached:.0%}" if reached > 0 else "–")
    distill = mean("loss/distill")
    return [*cells, f"{distill:.3f}" if distill else "–"]


def table(rows: list[dict], count: int) -> str:
    """Markdown table of a run's windows."""
    head = [
        "iterations",
        *(h for h, _, _ in ENDED),
        *(h for h, _, _ in COLUMNS),
        *SHARES,
        "hit score",
        "parried of reaching",
        "distill loss",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(window_cells(w)) + " |" for w in windows(rows, count)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the table of every run named."""
    p = bench_rows.parser(__doc__, "learn_report")
    p.add_argument("runs", nargs="+", help="run directories (holding metrics.jsonl)")
    p.add_argument("--windows", type=int, default=6, help="windows of iterations per run")
    p.add_argument(
        "--iterations", type=int, default=None, help="only each run's first N iterations (runs side by side)"
    )
    bench_rows.add_common_args(p)
    args = p.parse_args(argv)
    for run in args.runs:
        rows = runs.read_metrics(run)[: args.iterations]
        print(f"\n{run}: {len(rows)} iterations" + ("" if rows else " (none)"))
        if rows:
            print(table(rows, args.windows))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
