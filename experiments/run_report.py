"""Summarise training runs from their metrics: `python experiments/run_report.py runs/NAME [...]`.

For each run: set-up seconds, mean s/iteration, the iteration and time at which each curriculum level was
reached, when (if) it was solved, and the last return and fall rate.
"""

from __future__ import annotations

import sys

import _cli


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
    rows = _cli.read_metrics(run)
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
    rows = _cli.read_metrics(run)
    if not rows:
        return (1.0, 0.0, float("inf"))
    solved = next((r["time_s"] for r in rows if r.get("solved", 0) > 0.5), None)
    if solved is not None:
        return (0.0, solved, 0.0)
    rises = level_rises(rows)
    top = rises[-1] if rises else (0, 0, float("inf"))
    return (1.0, -top[0] + top[2] / 1e6, rows[-1]["episode/fall_rate"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--best"]:
        print(min(sys.argv[2:], key=progress_key))
    else:
        print("\n".join(report(run) for run in sys.argv[1:]))
