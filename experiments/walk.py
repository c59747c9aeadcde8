"""Train the walking teacher: `python experiments/walk.py --platform cpu|gpu --body simple ...`.

Runs the fused JAX iteration on either platform (MuJoCo Warp on a GPU, MJX's JAX physics on the CPU).
Writes runs/<name>/metrics.jsonl (one JSON object per iteration), checkpoints under runs/<name>/checkpoints
(the directory `boxjax.envs.walk.teacher.load_teacher` reads) and runs/<name>/summary.json. The progress line
shows the command-tracking errors (`env/walk/lin_error` m/s, `env/walk/yaw_error` rad/s) and the fall rate.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _cli  # noqa: E402

TRACKING = (
    ("env/walk/lin_error", "verr {:.2f}m/s", "velocity error"),
    ("env/walk/yaw_error", "yerr {:.2f}rad/s", "yaw-rate error"),
    ("env/walk/speed", "v {:.2f}m/s", "speed"),
)
"""Per-iteration tracking figures shown in the progress line (all of them are in the JSONL)."""

GPU_DEFAULTS = dict(num_envs=2048, unroll_length=32, minibatch_size=4096)
CPU_DEFAULTS = dict(num_envs=16, unroll_length=16, minibatch_size=64)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train, report."""
    parser = _cli.base_parser(__doc__)
    parser.add_argument(
        "--factor",
        choices=("auto", "fused", "stock"),
        default="auto",
        help="MuJoCo Warp mass-matrix factorisation (auto: fused for the 89-DoF bodies)",
    )
    args = parser.parse_args(argv)

    from boxjax import platform

    platform.configure(args.platform, args.cache)
    import jax

    from boxjax import envs
    from boxjax.envs.walk.env import WalkConfig
    from boxjax.rl import ppo, sharding

    defaults = ppo.PPOConfig(**(GPU_DEFAULTS if args.platform == "gpu" else CPU_DEFAULTS))
    config = ppo.PPOConfig(**{**defaults.to_dict(), **_cli.ppo_overrides(args)})
    options = _cli.field_values(args.env, WalkConfig())
    devices = sharding.resolve_devices(config.num_devices)
    fused = {"auto": None, "fused": True, "stock": False}[args.factor]
    env = envs.make(
        "walk",
        body=args.body,
        impl="warp" if args.platform == "gpu" else "jax",
        num_worlds=sharding.worlds_per_device(config, len(devices)),
        fused_factor=fused,
        **options,
    )
    name = args.name or f"walk-{args.body}-{args.platform}-{config.num_envs}"
    out = _cli.run_dir(name)
    print(
        f"walk: body={args.body} impl={env.backend.impl} devices={len(devices)} worlds={config.num_envs} "
        f"unroll={config.unroll_length} obs={env.observation_size} act={env.action_size} -> {out}",
        flush=True,
    )
    progress = _cli.open_progress(args, out, TRACKING)
    try:
        result, history = ppo.train_run(
            env,
            config,
            jax.random.PRNGKey(args.seed),
            _cli.run_options(args, out, progress_fn=progress, init=args.init),
        )
    finally:
        progress.close()
    if not history:
        print("nothing to do: the checkpoint already reached --iterations")
        return 0
    last = history[-1]
    summary = {
        **_cli.summary_head(args, history),
        "train_s": last["time_s"] - history[0]["setup_s"],
        "last_fall_rate": last["episode/fall_rate"],
        "last_lin_error_mps": last["env/walk/lin_error"],
        "last_yaw_error_radps": last["env/walk/yaw_error"],
        "checkpoints": os.path.join(out, "checkpoints"),
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary))
    _cli.write_curves(out)
    return _cli.exit_status(result)


if __name__ == "__main__":
    raise SystemExit(_cli.run_main(main))
