"""Run bookkeeping of every training command: the run folder, the progress line, the metrics log (JSON Lines,
and TensorBoard on request), set-up marks and the summary's head, and the truncation a resume depends on."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from typing import Any

PROCESS_START_S = time.perf_counter()
SETUP_MARKS_S: dict[str, float] = {}
"""Seconds from `PROCESS_START_S` to named points of a CLI's set-up before training (`mark`)."""


CPU_PROFILE = (
    ("profile/collector_step_s", "step {:.2f}s", "collector step"),
    ("profile/collector_wait_s", "cwait {:.2f}s", "collector wait"),
    ("profile/learner_update_s", "learn {:.2f}s", "learner update"),
    ("profile/allreduce_s", "ar {:.3f}s", "all-reduce"),
    ("profile/cpu_util", "cpu {:.0%}", "CPU utilisation"),
)
"""Per-iteration profile of the CPU path shown in the progress line (all of it is in the JSONL)."""


PROGRESS_LEGEND = (
    ("[i/N]", "iteration i of --iterations N, with its bar"),
    ("s/it", "wall seconds per iteration"),
    ("steps/s", "environment steps (worlds x control steps) per wall second"),
    ("ret", "mean return of the episodes that ended this iteration"),
    ("fall", "share of those episodes that ended in a fall (%)"),
    ("ep", "their mean length (control steps)"),
    ("nan, skip", "worlds turned non-finite, updates skipped as non-finite (shown when not 0)"),
    ("caps", "worlds whose solver stopped at an iteration cap, a warning (shown when not 0)"),
    ("ETA", "seconds left to --iterations at this pace"),
)
"""What the progress line's own columns mean (abbreviation, meaning with unit); a task adds its `extra`."""


def progress_legend(extra: tuple[tuple[str, str, str], ...] = ()) -> str:
    """The progress line's legend for a training command's --help: its own columns and the task's `extra`
    (figure, format, name), each with its unit (read from the format) or as a count per iteration."""
    rows = list(PROGRESS_LEGEND[:-1])
    for key, fmt, name in extra:
        abbreviation, _, value = fmt.partition(" ")
        tail = value.rpartition("}")[2]
        if value.endswith("%}"):
            unit = "%"
        elif tail.startswith("/"):
            unit = "out of the number after the slash"
        elif tail:
            unit = tail
        elif key.startswith("count/") or key == "overflow":
            unit = "count per iteration"
        else:
            unit = ""
        rows.append((abbreviation, f"{name} ({unit})" if unit else name))
    rows.append(PROGRESS_LEGEND[-1])
    width = max(len(abbreviation) for abbreviation, _ in rows)
    lines = [f"  {abbreviation:<{width}}  {meaning}" for abbreviation, meaning in rows]
    return "progress line, one per iteration (every figure is in runs/NAME/metrics.jsonl):\n" + "\n".join(
        lines
    )


def read_metrics(run: str) -> list[dict[str, Any]]:
    """The per-iteration rows of a run folder (its metrics.jsonl, or metrics.jsonl.gz) or of a metrics file
    itself (.jsonl or .jsonl.gz, as kept in results/logs/)."""
    path = run
    if not os.path.isfile(run):
        path = os.path.join(run, "metrics.jsonl")
        if not os.path.exists(path):
            path += ".gz"
        if not os.path.exists(path):
            raise FileNotFoundError(f"no {path[:-3]} or {path}")
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_dir(name: str) -> str:
    """runs/<name>/, created."""
    path = os.path.join("runs", name)
    os.makedirs(path, exist_ok=True)
    return path


def write_curves(out: str) -> None:
    """Draw the run's learning curves to out/curves.png (`boxjax.viz.curves`) and print where; a failure to
    draw is printed in one line and does not fail the finished run."""
    from boxjax.viz import curves

    try:
        print(f"curves: {curves.write_curves(out)}", flush=True)
    except (OSError, ValueError, ImportError) as err:
        print(f"curves not drawn: {err}", flush=True)


def open_progress(
    args: argparse.Namespace, out: str, extra: tuple[tuple[str, str, str], ...] = ()
) -> Progress:
    """The run's `Progress` on out/metrics.jsonl (and out/tensorboard with `--tensorboard`); resuming, the
    rows past the checkpoint resumed from are dropped first (they will be run again), so no iteration is
    logged twice."""
    keep = None
    if args.resume:
        from boxjax.models import checkpoint

        keep = checkpoint.latest_step(args.resume)
    # a hand-made Namespace (tests) may lack the flag
    board = os.path.join(out, "tensorboard") if getattr(args, "tensorboard", False) else None
    return Progress(
        args.iterations, os.path.join(out, "metrics.jsonl"), extra=extra, keep_through=keep, tensorboard=board
    )


def mark(name: str) -> None:
    """Record how long after `PROCESS_START_S` the set-up reached `name` (summary.json's `setup_marks_s`)."""
    SETUP_MARKS_S[name] = time.perf_counter() - PROCESS_START_S


def summary_head(args: argparse.Namespace, history: list[dict[str, Any]]) -> dict[str, Any]:
    """What every training CLI's summary.json starts with: set-up time, iterations, overrides, returns."""
    return {
        "setup_s": history[0].get("setup_s"),
        "setup_phases_s": {k: v for k, v in history[0].items() if k.startswith("setup/")},
        "setup_marks_s": dict(SETUP_MARKS_S),
        "iterations": int(history[-1]["iteration"]),
        "overrides": {"ppo": args.ppo, "env": args.env},
        "first_return": history[0]["episode/return"],
        "last_return": history[-1]["episode/return"],
    }


def truncate_rows(jsonl_path: str, last_iteration: int) -> None:
    """Drop the rows of a metrics file past `last_iteration` (rewritten whole, then renamed into place)."""
    if not os.path.exists(jsonl_path):
        return
    with open(jsonl_path) as f:
        rows = [line for line in f if line.strip()]
    kept = [line for line in rows if json.loads(line).get("iteration", 0) <= last_iteration]
    if len(kept) == len(rows):
        return
    with open(jsonl_path + ".tmp", "w") as f:
        f.writelines(kept)
    os.replace(jsonl_path + ".tmp", jsonl_path)


TENSORBOARD_EXTRA = "pip install -e '.[tensorboard]' (make installs it)"
"""How to get the package `--tensorboard` writes with."""
TENSORBOARD_FLUSH_S = 10
"""Seconds between the TensorBoard writer's flushes to disk (a live board lags by at most this)."""


class TensorBoardLog:
    """Every iteration's figures as TensorBoard scalars, at the iteration as step, through tensorboardX's
    `SummaryWriter` (the `tensorboard` extra; a clear `ImportError` naming it when missing)."""

    def __init__(self, logdir: str, purge_step: int | None = None):
        """Write to `logdir`; with `purge_step` (a resume), the events from that step on are dropped."""
        try:
            from tensorboardX import SummaryWriter
        except ImportError as err:
            raise ImportError(
                f"--tensorboard needs tensorboardX, the tensorboard extra: {TENSORBOARD_EXTRA}"
            ) from err
        self.writer = SummaryWriter(logdir, purge_step=purge_step, flush_secs=TENSORBOARD_FLUSH_S)

    def __call__(self, figures: dict[str, Any]) -> None:
        """Log one iteration's numeric figures under their own names."""
        step = int(figures["iteration"])
        for name, value in figures.items():
            if name != "iteration" and isinstance(value, int | float):
                self.writer.add_scalar(name, value, step)

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()


class Progress:
    """Prints one progress line per iteration and appends every iteration's figures to a JSONL file (and
    to TensorBoard's event file with `tensorboard`, a folder)."""

    def __init__(
        self,
        total: int,
        jsonl_path: str,
        extra: tuple[tuple[str, str, str], ...] = (),
        keep_through: int | None = None,
        tensorboard: str | None = None,
    ):
        self.total = total
        if keep_through is not None:
            truncate_rows(jsonl_path, keep_through)
        purge = None if keep_through is None else keep_through + 1
        self.board = TensorBoardLog(tensorboard, purge) if tensorboard else None
        self.jsonl = open(jsonl_path, "a")  # noqa: SIM115 - closed in close()
        self.extra = extra
        self.tty = sys.stdout.isatty()

    def __call__(self, figures: dict[str, Any]) -> None:
        """Show and log one iteration."""
        self.jsonl.write(json.dumps(figures) + "\n")
        self.jsonl.flush()
        if self.board:
            self.board(figures)
        it = int(figures["iteration"])
        done = min(1.0, it / max(self.total, 1))
        bar = "#" * int(20 * done) + "." * (20 - int(20 * done))
        eta = (self.total - it) * figures["s_per_iteration"]
        parts = [
            f"[{it:5d}/{self.total}] {bar}",
            f"{figures['s_per_iteration']:.3f} s/it",
            f"{figures['steps_per_s']:,.0f} steps/s",
            f"ret {figures['episode/return']:.1f}",
            f"fall {100 * figures['episode/fall_rate']:.1f}%",
            f"ep {figures['episode/length']:.0f}",
        ]
        nonfinite = figures.get("env/nonfinite_worlds", 0.0)
        if nonfinite or figures.get("guard/skipped_steps", 0.0):
            parts.append(f"nan {nonfinite:.0f} skip {figures.get('guard/skipped_steps', 0.0):.0f}")
        caps = [v for k, v in figures.items() if k.startswith("env/caps/")]
        if any(caps):
            parts.append(f"caps {max(caps):.0f}")
        parts += [fmt.format(figures[key]) if key in figures else "" for key, fmt, _ in self.extra]
        parts.append(f"ETA {eta:.0f}s")
        line = "  ".join(p for p in parts if p)
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", flush=True)

    def close(self) -> None:
        """Finish the line and close the log."""
        if self.tty:
            print()
        self.jsonl.close()
        if self.board:
            self.board.close()
