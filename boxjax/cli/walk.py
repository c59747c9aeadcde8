"""Train the walking teacher: `boxjax train --task walk --platform cpu|gpu --body simple ...`.

Runs the fused JAX iteration on either platform (MuJoCo Warp on a GPU, MJX's JAX physics on the CPU).
Writes runs/<name>/metrics.jsonl (one JSON object per iteration), checkpoints under runs/<name>/checkpoints
(the directory `boxjax.envs.walk.teacher.load_teacher` reads) and runs/<name>/summary.json. The progress line
shows the command-tracking errors (`env/walk/lin_error` m/s, `env/walk/yaw_error` rad/s) and the fall rate.
"""

from __future__ import annotations

import json
import os

from boxjax import runs
from boxjax.cli import common
from boxjax.envs.walk import training


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train, report."""
    parser = common.base_parser(__doc__, "boxjax train --task walk")
    parser.epilog = runs.progress_legend(training.PROGRESS)
    common.add_warp_arguments(parser)
    args = parser.parse_args(argv)
    common.check_warp_arguments(parser, args)

    from boxjax import platform

    platform.configure(args.platform, args.cache)
    import jax

    from boxjax import envs
    from boxjax.envs.walk.env import WalkConfig
    from boxjax.rl import ppo, sharding

    config = common.ppo_config({**training.ppo_defaults(args.platform), **common.ppo_overrides(args)})
    options = common.field_values(args.env, WalkConfig())
    devices = sharding.resolve_devices(config.num_devices)
    env = envs.make(
        "walk",
        body=args.body,
        impl="warp" if args.platform == "gpu" else "jax",
        num_worlds=sharding.worlds_per_device(config, len(devices)),
        **common.warp_options(args),
        **options,
    )
    name = args.name or f"walk-{args.body}-{args.platform}-{config.num_envs}"
    common.check_init(args)
    out = runs.run_dir(name)
    print(
        f"walk: body={args.body} impl={env.backend.impl} devices={len(devices)} worlds={config.num_envs} "
        f"unroll={config.unroll_length} obs={env.observation_size} act={env.action_size} -> {out}",
        flush=True,
    )
    progress = runs.open_progress(args, out, training.PROGRESS)
    try:
        result, history = ppo.train_run(
            env,
            config,
            jax.random.PRNGKey(args.seed),
            common.run_options(args, out, progress_fn=progress, init=args.init),
        )
    finally:
        progress.close()
    if not history:
        print("nothing to do: the checkpoint already reached --iterations")
        return 0
    summary = {**runs.summary_head(args, history), **training.summary(history, out)}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary))
    runs.write_curves(out)
    return common.exit_status(result)


if __name__ == "__main__":
    raise SystemExit(common.run_main(main))
