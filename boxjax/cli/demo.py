"""`make demo`: the blocking task learning on a small CPU within minutes, then its curves and a short video.

    boxjax demo [--name NAME] [--minutes M]        (or python experiments/demo.py)

Trains `boxjax train --task block` on the CPU path with `TRAINING` until `ITERATIONS` or `--minutes` after its
start (compile included), prints how the episodes moved from the first tenth of the run to the last (return,
fall rate, length) and where its curves image is; then, when MuJoCo has an OpenGL backend here, `boxjax watch`
renders a few seconds of the trained policy (`VIDEO`) and the video's path is printed. Without one it says so
and skips the video, and the demo still succeeds. Each demo is a new run folder, runs/demo-DATE-TIME unless
`--name` names one (a training CLI appends to the metrics of a folder that exists).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import time

from boxjax import runs
from boxjax.cli import common
from boxjax.viz import curves

TRAINING = (
    "--platform", "cpu", "--body", "simple", "--envs", "64", "--unroll", "16", "--minibatch", "512",
    "--env", "kind_weights=1,0,0,0,0",
    "--ppo", "init_log_std=-1.6", "--ppo", "desired_kl=0.04", "--ppo", "distill_coef=10",
)  # fmt: skip
"""`boxjax train --task block` flags of the demo: the simple body on the CPU path, 64 worlds x 16 steps, face
episodes only (the simulated opponent punching), the stance's exploration noise and KL target, and the shipped
walking teacher's legs distilled with weight 10: imitating a walker that stands is what moves first. At the
CLI's CPU defaults (8 worlds x 8 steps, all five kinds, distillation 0.1, KL target 0.01) nothing visible is
learnt in ten minutes (measured at f6a6238; docs/guide.md says what the demo shows)."""
ITERATIONS = 360
"""Iterations at most (the progress line's ETA counts toward them)."""
MINUTES = 6.5
"""Default wall-time budget of the training, compile included (the video's compile comes after it)."""
VIDEO = ("--steps", "120", "--size", "320x240", "--labels")
"""`boxjax watch` flags of the video: 3 s of one episode (40 control steps a second), small, punch
outcomes."""
VIDEO_FILE = "fighter.mp4"
"""The video's name in the run folder."""
REPORTED = (("return", "episode/return", "{:.0f}"), ("falls", "episode/fall_rate", "{:.0%}"),
            ("episode", "episode/length", "{:.0f} steps"))  # fmt: skip
"""(label, figure, format) of the first-to-last-tenth line."""


def train_command(name: str, minutes: float) -> list[str]:
    """The training's command line: `boxjax train --task block` with `TRAINING`, stopping at `ITERATIONS` or
    `minutes`."""
    budget = ("--iterations", str(ITERATIONS), "--minutes", str(minutes), "--name", name)
    return [sys.executable, "-m", "boxjax", "train", "--task", "block", *TRAINING, *budget]


def video_command(run: str, out: str) -> list[str]:
    """The video's command line: `boxjax watch` on the run folder's newest checkpoint, written to `out`."""
    return [sys.executable, "-m", "boxjax", "watch", run, *VIDEO, "--out", out]


def tenth_means(rows: list[dict], key: str) -> tuple[float, float]:
    """Mean of `key` over the first and over the last tenth of the rows (at least one row each), counting
    only iterations in which an episode ended (`curves.figure_values`); NaN where none did."""
    values = curves.figure_values(rows, key)
    size = max(1, len(values) // 10)

    def mean(part: list[float]) -> float:
        kept = [v for v in part if not math.isnan(v)]
        return sum(kept) / len(kept) if kept else math.nan

    return mean(values[:size]), mean(values[-size:])


def learning_line(rows: list[dict]) -> str:
    """What moved between the first and the last tenth of the run, e.g. 'return 147 -> 491, ...'."""
    moved = []
    for label, key, fmt in REPORTED:
        first, last = tenth_means(rows, key)
        moved.append(f"{label} {fmt.format(first)} -> {fmt.format(last)}")
    return ", ".join(moved)


def run_child(command: list[str], env: dict | None = None) -> int:
    """Run `command` to its end and return its status. Ctrl-C reaches the child from the terminal (it
    stops after its iteration in flight and checkpoints), so this process ignores it and waits."""
    child = subprocess.Popen(command, env=env)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: list[str] | None = None) -> int:
    """Train, report what moved and the curves' path, then render the video if OpenGL works here."""
    p = common.Parser(
        prog="boxjax demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--name", default=None, help="run folder under runs/ (default demo-DATE-TIME)")
    p.add_argument("--minutes", type=float, default=MINUTES, help="wall-time budget of the training")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    args = p.parse_args(argv)
    from boxjax import platform

    start = time.perf_counter()
    name = args.name or time.strftime("demo-%Y%m%d-%H%M%S")
    run = os.path.join("runs", name)
    status = run_child(train_command(name, args.minutes))
    if status:
        return status
    print(f"demo: first tenth of the run -> last tenth: {learning_line(runs.read_metrics(run))}")
    try:
        backend = platform.choose_gl(os.environ.get("MUJOCO_GL"))
    except platform.PlatformError as err:
        print(f"demo: no video ({err})")
        video = None
    else:
        video = os.path.join(run, VIDEO_FILE)
        status = run_child(video_command(run, video), {**os.environ, "MUJOCO_GL": backend})
        if status:
            return status
    print(f"demo: {(time.perf_counter() - start) / 60:.1f} min; curves: {os.path.join(run, 'curves.png')}")
    if video:
        print(f"demo: video: {video}")
    return 0


if __name__ == "__main__":
    raise SystemExit(common.run_main(main))
