"""Summarise training runs from their metrics: `python experiments/run_report.py runs/NAME [...]`.

For each run: set-up seconds, mean s/iteration, the iteration and time at which each curriculum level was
reached, when (if) it was solved, and the last return and fall rate.

`python experiments/run_report.py runs/NAME --rows OUT.jsonl --label device="NVIDIA H200" --label ...`
appends a solved run's benchmark rows (`solve_rows`) to OUT.jsonl instead, labelled with every `--label`
(`REQUIRED_LABELS` at least).
"""

from __future__ import annotations

from boxjax import runs
from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

REQUIRED_LABELS = ("device", "body", "task", "worlds", "commit", "caches", "rule", "seed", "command")
"""Labels every solve row names (the brief's row fields, and what makes the figure reproducible)."""


def level_rises(rows: list[dict]) -> list[tuple[int, int, float]]:
    """[(level, iteration, time_s)] for every iteration where the curriculum level went up."""
    out, level = [], 0
    for row in rows:
        now = int(row.get("curriculum/level", 0))
        if now > level:
            out.append((now, int(row["iteration"]), row["time_s"]))
            level = now
    return out


def report(run: str) -> str:
    """One run's summary lines."""
    rows = runs.read_metrics(run)
    if not rows:
        return f"{run}: no iterations"
    steady = rows[1:] or rows
    s_per_it = sum(r["s_per_iteration"] for r in steady) / len(steady)
    solved = next((r for r in rows if r.get("solved", 0) > 0.5), None)
    last = rows[-1]
    lines = [
        f"{run}: set-up {rows[0]['setup_s']:.1f} s, {len(rows)} iterations, {s_per_it:.3f} s/it, "
        f"{sum(r['steps_per_s'] for r in steady) / len(steady):,.0f} steps/s",
        "  levels: " + ", ".join(f"{lv}@it{it} ({t:.0f}s)" for lv, it, t in level_rises(rows)),
        f"  last: return {last['episode/return']:.1f}, fall {100 * last['episode/fall_rate']:.1f}%, "
        f"length {last['episode/length']:.0f}",
    ]
    if solved:
        lines.append(
            f"  SOLVED at iteration {int(solved['iteration'])}, {solved['time_s']:.1f} s after process start "
            f"({solved['time_s'] - rows[0]['setup_s']:.1f} s of training)"
        )
    return "\n".join(lines)


def progress_key(run: str) -> tuple[float, float, float]:
    """Sort key, best first: solved sooner (wall time), else higher level reached sooner, else fewer falls."""
    rows = runs.read_metrics(run)
    if not rows:
        return (1.0, 0.0, float("inf"))
    solved = next((r["time_s"] for r in rows if r.get("solved", 0) > 0.5), None)
    if solved is not None:
        return (0.0, solved, 0.0)
    rises = level_rises(rows)
    top = rises[-1] if rises else (0, 0, float("inf"))
    return (1.0, -top[0] + top[2] / 1e6, rows[-1]["episode/fall_rate"])


def solve_rows(rows: list[dict], labels: dict) -> list[dict]:
    """Benchmark rows of a solved run: time to solve, set-up (`setup_s_cold` / `setup_s_warm` by the
    `caches` label), training seconds and iterations to the solve, mean s/iteration after the first."""
    missing = [k for k in REQUIRED_LABELS if k not in labels]
    if missing:
        raise ValueError(f"solve rows need the labels {', '.join(missing)}")
    resumed = sum("setup_s" in r for r in rows) > 1  # each process marks its first row with its set-up
    if resumed or [r["iteration"] for r in rows] != list(range(1, len(rows) + 1)):
        raise ValueError(
            "solve rows need one fresh run (iterations 1, 2, ... from one process), not a resumed one"
        )
    solved = next((r for r in rows if r.get("solved", 0) > 0.5), None)
    if solved is None:
        raise ValueError(f"the run did not solve in its {len(rows)} iterations: no solve rows")
    upto = [r for r in rows if 1 < r["iteration"] <= solved["iteration"]] or rows[:1]
    setup = rows[0]["setup_s"]
    setup_key = f"setup_s_{labels['caches']}" if labels["caches"] in ("cold", "warm") else "setup_s"
    figures = {
        "time_to_solve_s": (solved["time_s"], "s"),
        setup_key: (setup, "s"),
        "train_s_to_solve": (solved["time_s"] - setup, "s"),
        "iterations_to_solve": (solved["iteration"], "iterations"),
        "s_per_iteration": (sum(r["s_per_iteration"] for r in upto) / len(upto), "s"),
    }
    return [{"bench": "solve", **labels, "metric": k, "value": v, "unit": u} for k, (v, u) in figures.items()]


def main(argv: list[str] | None = None) -> int:
    """Print each run's summary, the best run (`--best`), or append a run's solve rows (`--rows`)."""
    p = bench_rows.parser(__doc__, "run_report")
    p.add_argument("runs", nargs="+", help="run directories (holding metrics.jsonl)")
    p.add_argument("--best", action="store_true", help="print only the run that progressed most")
    p.add_argument("--rows", default=None, help="append the (one) run's solve rows to this JSON Lines file")
    bench_rows.add_common_args(p, label=True)
    args = p.parse_args(argv)
    if args.best:
        print(min(args.runs, key=progress_key))
    elif args.rows:
        if len(args.runs) != 1:
            p.error("--rows takes one run")
        labels = bench_rows.labels_of(p, args.label, integers=("worlds", "unroll", "seed"))
        new = bench_rows.write_rows(args.rows, solve_rows(runs.read_metrics(args.runs[0]), labels))
        print(f"{len(new)} rows -> {args.rows}")
    else:
        print("\n".join(report(run) for run in args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
