"""Watch a trained fighter:
`boxjax watch RUN_OR_CHECKPOINT [--kind face|command|...] [--episodes N] [--out fighter.mp4]`,
or `boxjax watch --body BODY` for the package's trained blocker of that body (--body lists those shipped).

RUN_OR_CHECKPOINT is a run folder (runs/NAME: its checkpoints/ are read), a checkpoint directory or a policy
file (`boxjax export`); its (newest checkpoint's) meta names the task, body and task config,
and the environment is rebuilt from them on MJX's JAX physics. The policy's mean action (no exploration
noise) plays N episodes on the CPU, side by side (one world each, the same seed giving the same episodes),
until each ends or --steps pass; MuJoCo's own renderer draws every control step offscreen (OpenGL through
EGL, else OSMesa; `boxjax.platform.select_gl`) with a camera that follows the fighters, and the episodes are
written one after another as MP4 or GIF (by --out's extension; the `watch` extra: imageio, and
imageio-ffmpeg for MP4).

--kind              block task only: every episode of this kind (the config's kind weights otherwise)
--rays              block task: the 32 vision rays in face episodes (green seen, red hidden by our gloves)
--targets           block task: the command's glove targets in command episodes (yellow spheres)
--labels            block task: punch outcomes above us, e.g. "punch on our head: blocked" (or parried:
                    blocked touching our guard; or missed); a hit reads "score 0.60 of 1 (partly blocked)":
                    the share of 19 paths from his glove to the target that our guard leaves clear, clean
                    from the task's clean_hit_score on

A fighter with an opponent is labelled "ours" (the policy's) and the opponent "opponent"; the punching bag is
not drawn in face episodes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from boxjax.cli import common, policies
from boxjax.cli.policies import SHIPPED_DIR as SHIPPED_DIR  # where `--body` finds the shipped blockers
from boxjax.cli.policies import checkpoint_dir, forced_kind, load, shipped_blocker

BLOCK_ONLY = ("kind", "rays", "targets", "labels")
"""Options that only the block task has a meaning for."""


def parser() -> common.Parser:
    """The command line."""
    p = common.Parser(
        prog="boxjax watch", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "source", metavar="RUN_OR_CHECKPOINT", nargs="?", default=None,
        help="runs/NAME, a checkpoint directory or a policy file (default: the shipped blocker of --body)",
    )  # fmt: skip
    shipped = " | ".join(policies.shipped_bodies()) or "none ships"
    p.add_argument(
        "--body",
        default=None,
        help=f"without a source: the package's trained blocker of this body ({shipped})",
    )
    p.add_argument("--kind", default=None, help="block task: face | command | walk | bag | shove")
    p.add_argument("--episodes", type=int, default=1, help="episodes to play, one after another in the video")
    p.add_argument("--steps", type=int, default=None, help="control steps per episode at most (default: all)")
    p.add_argument("--out", default="fighter.mp4", help="the video: .mp4 or .gif")
    p.add_argument("--size", default="640x480", metavar="WxH", help="image size in pixels")
    p.add_argument("--shadows", action="store_true", help="shadows and reflections (slow on software GL)")
    p.add_argument("--rays", action="store_true", help="block task: vision rays")
    p.add_argument("--targets", action="store_true", help="block task: the command's glove targets")
    p.add_argument("--labels", action="store_true", help="block task: punch outcomes")
    p.add_argument("--seed", type=int, default=0, help="seed of the episodes' resets")
    p.add_argument("--cache", default=None, help="cache folder for compiled code (default $BOXJAX_CACHE)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return p


def main(argv: list[str] | None = None) -> int:
    """Load, check, roll out, render, write."""
    args = parser().parse_args(argv)
    width, height = image_size(args.size)
    from boxjax import platform

    backend = platform.select_gl()  # before anything imports mujoco, and before JAX's threads (it forks)
    platform.configure("cpu", args.cache)
    source = checkpoint_dir(args.source) if args.source else shipped_blocker(args.body)
    meta = policies.read_meta(source)
    check_options(args, meta.get("env"))
    import jax

    from boxjax import viz
    from boxjax.rl import trace

    viz.check_video(args.out)
    env, config, policy = load(source, meta, args.episodes)
    if meta.get("agents"):  # a self-play checkpoint: every fighter acts by its own policy
        policy = {a["name"]: policies.restore(source, meta, env, None, a["name"])[1] for a in meta["agents"]}
    params = env.default_params()
    if args.kind:
        params = forced_kind(params, args.kind)
    block = meta["env"] == "block"
    record = viz.block_recorder(env, params) if block else viz.pose_record
    steps = args.steps or env.config.max_steps
    start = time.perf_counter()
    records, frames = trace.trace(
        env, config, policy, jax.random.PRNGKey(args.seed), record, episodes=args.episodes, steps=steps,
        env_params=params,
    )  # fmt: skip
    traced = time.perf_counter()
    view = viz.View(width, height, args.shadows, args.rays, args.targets, args.labels)
    video = render(env, records, frames, view, viz.block_marks(env) if block else None)
    drawn = time.perf_counter()
    viz.write_video(args.out, video, fps=1.0 / env.config.control_dt_s)
    print(
        f"watch: {meta['env']} body={meta['body']} kind={args.kind or 'mixed'} episodes={args.episodes} "
        f"frames={[int(n) for n in frames]} GL={backend}: rollout {traced - start:.1f} s, drawing "
        f"{drawn - traced:.1f} s -> {args.out}",
        flush=True,
    )
    return 0


def image_size(text: str) -> tuple[int, int]:
    """`--size` WxH -> (width, height) in pixels, both even (as H.264 needs) and positive."""
    w, sep, h = text.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or int(w) < 2 or int(h) < 2 or int(w) % 2 or int(h) % 2:
        raise ValueError(f"--size {text!r}: expected WxH, two even pixel counts like 640x480")
    return int(w), int(h)


def check_options(args, task: str | None) -> None:
    """Refuse the block task's options for another task's checkpoint, an unknown kind, a count below 1."""
    from boxjax.envs.block.config import KINDS

    given = [f"--{name}" for name in BLOCK_ONLY if getattr(args, name) not in (None, False)]
    if task != "block" and given:
        raise ValueError(f"{', '.join(given)}: only for the block task; this checkpoint is of {task!r}")
    if args.kind is not None and args.kind not in KINDS:
        raise ValueError(f"--kind {args.kind!r}: valid kinds are {', '.join(KINDS)}")
    if args.episodes < 1 or (args.steps is not None and args.steps < 1):
        raise ValueError("--episodes and --steps take counts of 1 or more")


def render(env, records: dict, frames: np.ndarray, view, marks) -> np.ndarray:
    """(sum(frames), H, W, 3) uint8: the traced episodes drawn one after another (`marks`: the block
    arena's, for its overlays; None for another task)."""
    from boxjax import viz
    from boxjax.viz import render as draw

    hold = max(1, round(draw.LABEL_HOLD_S / env.config.control_dt_s))
    videos = []
    for world, count in enumerate(frames):
        one = draw.episode(records, world, int(count))
        labels = draw.outcome_labels(one, hold) if view.labels else None
        videos.append(viz.render_episode(env.mj_model, one, view, labels, marks))
    return np.concatenate(videos)


if __name__ == "__main__":
    raise SystemExit(common.run_main(main))
