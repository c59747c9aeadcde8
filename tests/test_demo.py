"""`make demo`'s script: its two command lines are ones the training and video CLIs accept, what it reports
(first against last tenth of the run) leaves out the iterations in which no episode ended, and without OpenGL
it skips the video and still succeeds."""

import math
import os
import sys

from boxjax.cli import common, demo, watch
from boxjax.envs.block.config import BlockConfig
from boxjax.rl.config import PPOConfig


def test_the_training_command_is_a_valid_block_run():
    command = demo.train_command("demo-x", 6.5)
    assert command[:6] == [sys.executable, "-m", "boxjax", "train", "--task", "block"]
    args = common.base_parser("block", "boxjax train --task block").parse_args(command[6:])
    assert (args.platform, args.name, args.minutes, args.iterations) == (
        "cpu",
        "demo-x",
        6.5,
        demo.ITERATIONS,
    )
    task = BlockConfig(body=args.body, **common.field_values(args.env, BlockConfig()))
    assert task.kind_weights == (1.0, 0.0, 0.0, 0.0, 0.0)
    config = PPOConfig(**common.ppo_overrides(args))  # sizes and fields that fit together
    assert (config.batch_size, config.num_minibatches, config.distill_coef) == (1024, 2, 10.0)


def test_the_video_command_is_a_valid_watch_call():
    command = demo.video_command("runs/demo-x", "runs/demo-x/fighter.mp4")
    assert command[:4] == [sys.executable, "-m", "boxjax", "watch"]
    args = watch.parser().parse_args(command[4:])
    assert (args.source, args.out, watch.image_size(args.size)) == (
        "runs/demo-x", "runs/demo-x/fighter.mp4", (320, 240)
    )  # fmt: skip


def _rows(returns: list[float | None]) -> list[dict]:
    """Metrics rows with these returns; None: an iteration in which no episode ended (0 placeholders)."""
    return [
        {"episode/count": 0.0 if r is None else 2.0, "episode/return": r or 0.0, "episode/fall_rate": 1.0,
         "episode/length": 10.0 * (r or 0.0), "s_per_iteration": 0.5}
        for r in returns
    ]  # fmt: skip


def test_first_and_last_tenth_of_the_run():
    rows = _rows([1.0, None, *[50.0] * 16, 9.0, None])  # 20 rows: tenths of 2
    assert demo.tenth_means(rows, "episode/return") == (1.0, 9.0)
    assert demo.learning_line(rows) == "return 1 -> 9, falls 100% -> 100%, episode 10 steps -> 90 steps"
    first, last = demo.tenth_means(_rows([None, None, 3.0]), "episode/return")
    assert math.isnan(first) and last == 3.0


def _fake_children(monkeypatch, backend: str | None) -> list[tuple[list[str], dict | None]]:
    """`demo.run_child` recording its calls (the training writes a small metrics file) and `choose_gl`
    answering `backend`, or failing as on a machine without OpenGL when None."""
    import json

    from boxjax import platform

    calls = []

    def run_child(command, env=None):
        calls.append((command, env))
        if command[3] == "train":
            os.makedirs("runs/demo-x", exist_ok=True)
            with open("runs/demo-x/metrics.jsonl", "w") as f:
                f.writelines(json.dumps(row) + "\n" for row in _rows([1.0, 2.0, 3.0]))
        return 0

    def choose_gl(preset):
        if backend is None:
            raise platform.PlatformError("no OpenGL backend for MuJoCo's offscreen renderer works here")
        return backend

    monkeypatch.setattr(demo, "run_child", run_child)
    monkeypatch.setattr(platform, "choose_gl", choose_gl)
    return calls


def test_without_opengl_the_demo_skips_the_video_and_succeeds(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    calls = _fake_children(monkeypatch, None)
    assert demo.main(["--name", "demo-x"]) == 0
    out = capsys.readouterr().out
    assert len(calls) == 1 and "demo: no video (no OpenGL backend" in out and "demo: video:" not in out
    assert out.rstrip().endswith("curves: runs/demo-x/curves.png")


def test_with_opengl_the_demo_ends_with_the_video_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    calls = _fake_children(monkeypatch, "egl")
    assert demo.main(["--name", "demo-x"]) == 0
    (video, env) = calls[1]
    assert video[3] == "watch" and env["MUJOCO_GL"] == "egl"
    out = capsys.readouterr().out
    assert "return 1 -> 3" in out and out.rstrip().endswith("demo: video: runs/demo-x/fighter.mp4")


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _words(path: str) -> str:
    """A document's text with its line breaks and runs of spaces as single spaces."""
    with open(os.path.join(REPO, path)) as f:
        return " ".join(f.read().split())


def test_the_guide_quotes_the_demo_figures_of_the_run_it_cites():
    import re

    from boxjax import runs

    guide = _words("docs/guide.md")
    cited = re.findall(r"results/logs/(demo-[\w.-]+\.jsonl\.gz)", guide)
    assert cited, "docs/guide.md cites no demo run under results/logs/"
    rows = runs.read_metrics(os.path.join(REPO, "results", "logs", cited[0]))
    (r0, r1), (f0, f1), (e0, e1) = (
        demo.tenth_means(rows, key) for key in ("episode/return", "episode/fall_rate", "episode/length")
    )
    quoted = (
        f"return {r0:.0f} → {r1:.0f}, falls {100 * f0:.0f} % → {100 * f1:.0f} %, "
        f"episodes {e0:.0f} → {e1:.0f} control steps"
    )
    assert quoted in guide, quoted
    assert f"{demo.ITERATIONS} iterations or {demo.MINUTES:g} minutes" in guide
    assert f"{demo.MINUTES:g} min of training" in _words("README.md")
