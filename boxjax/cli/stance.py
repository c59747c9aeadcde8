"""Train the stance task: `boxjax train --task stance --platform cpu|gpu --body simple ...`.

`--platform gpu` runs the fused JAX iteration (MuJoCo Warp); `--platform cpu` runs the CPU path
(`boxjax.rl.cpu.workers`: MuJoCo C collectors and JAX learners, serial or decoupled, see its flags).

Writes runs/<name>/metrics.jsonl (one JSON object per iteration) and checkpoints under
runs/<name>/checkpoints, and prints the time to solve when the curriculum is solved.
"""

from __future__ import annotations

import json
import os

from boxjax import runs
from boxjax.cli import common
from boxjax.envs.stance import training


def ppo_config(args):
    """The run's PPOConfig: the task's defaults for this platform (`training.ppo_defaults`), then the
    command line's sizes and `--ppo` values."""

    overrides = common.ppo_overrides(args)
    if args.platform == "cpu":
        worlds = common.cpu_worlds(args, training.CPU_WORLDS)
        overrides["num_envs"] = worlds
    else:
        worlds = None
    defaults = training.ppo_defaults(args.platform, worlds, overrides.get("unroll_length"))
    return common.ppo_config({**defaults, **overrides})


def env_options(args) -> dict:
    """The run's StanceConfig fields: the `--rule`'s (`training.env_defaults`), then the command line's
    `--env`."""
    from boxjax.envs.stance.env import StanceConfig

    return {**training.env_defaults(args.rule), **common.field_values(args.env, StanceConfig())}


def effective_settings(config, options: dict) -> dict:
    """The run's shape and its values of every field the stance defaults set (`training.PPO_SETTINGS`,
    `training.ENV_RECIPE`):
    what a summary needs to be read after the defaults change."""
    from boxjax.envs.stance.env import StanceConfig

    env = StanceConfig(**options)
    return {
        "worlds": config.num_envs,
        "unroll": config.unroll_length,
        **{name: getattr(config, name) for name in training.PPO_SETTINGS},
        **{name: getattr(env, name) for name in training.ENV_RECIPE},
    }


def arguments(argv: list[str] | None = None):
    """The parsed command line."""
    parser = common.base_parser(__doc__, "boxjax train --task stance")
    parser.epilog = runs.progress_legend(training.progress_columns(0) + runs.CPU_PROFILE)
    parser.add_argument("--keep-going", action="store_true", help="do not stop when solved")
    parser.add_argument(
        "--rule",
        choices=training.RULES,
        default="fast",
        help="curriculum window: fast (ours) or seed (2 episodes)",
    )
    common.add_warp_arguments(parser)
    common.add_cpu_arguments(parser, training.CPU_WORLDS)
    args = parser.parse_args(argv)
    common.check_warp_arguments(parser, args)
    return args


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train, report."""
    args = arguments(argv)

    from boxjax import platform

    platform.configure(args.platform, args.cache)
    runs.mark("platform_configured")
    from boxjax.envs.stance.env import StanceConfig

    config = ppo_config(args)
    options = env_options(args)
    levels = StanceConfig(**options).levels
    name = args.name or f"stance-{args.body}-{args.platform}-{config.num_envs}"
    common.check_init(args)
    out = runs.run_dir(name)
    extra = training.progress_columns(levels) + (runs.CPU_PROFILE if args.platform == "cpu" else ())
    progress = runs.open_progress(args, out, extra)
    run = common.run_options(
        args, out, progress_fn=progress, init=args.init, stop_when_solved=not args.keep_going
    )
    try:
        if args.platform == "cpu":
            result, history = train_cpu(args, config, options, out, run)
        else:
            result, history = train_gpu(args, config, options, out, run)
    finally:
        progress.close()
    if not history:
        print("nothing to do: the checkpoint already reached --iterations")
        return 0
    summary = {
        **runs.summary_head(args, history),
        "rule": args.rule,
        "settings": effective_settings(config, options),
        **training.summary(history, result.solved_at_s),
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    if result.solved_at_s is not None:
        print(
            f"SOLVED in {result.solved_at_s:.1f} s after {summary['iterations']} iterations "
            f"(set-up {summary['setup_s']:.1f} s, training {summary['train_s_to_solve']:.1f} s)"
        )
    print(json.dumps(summary))
    runs.write_curves(out)
    return common.exit_status(result)


def train_cpu(args, config, options: dict, out: str, run):
    """The CPU path: collectors on MuJoCo C (`mujoco.batch`), learners with the GPU path's loss code."""
    import functools

    import jax

    from boxjax.envs.cpu import CpuEnv
    from boxjax.envs.stance.env import StanceConfig
    from boxjax.rl.cpu import workers

    layout = common.workers_config(args)
    stance_config = StanceConfig(body=args.body, **options)
    probe = CpuEnv(stance_config)
    print(
        f"stance: body={args.body} physics=mujoco-cpu worlds={config.num_envs} unroll={config.unroll_length} "
        f"obs={probe.observation_size} act={probe.action_size} -> {out}",
        flush=True,
    )
    runs.mark("env_built")
    factory = functools.partial(CpuEnv, stance_config)
    return workers.train(factory, config, layout, jax.random.PRNGKey(args.seed), run)


def train_gpu(args, config, options: dict, out: str, run):
    """The fused JAX path (MuJoCo Warp on a GPU)."""
    import jax

    from boxjax import envs
    from boxjax.rl import ppo

    factor = common.warp_options(args)
    env = envs.make(
        "stance", body=args.body, num_worlds=config.num_envs * config.num_seeds, **factor, **options
    )
    print(
        f"stance: body={args.body} impl={env.backend.impl} worlds={config.num_envs} "
        f"unroll={config.unroll_length} obs={env.observation_size} act={env.action_size} -> {out}",
        flush=True,
    )
    runs.mark("env_built")
    return ppo.train_run(env, config, jax.random.PRNGKey(args.seed), run)


if __name__ == "__main__":
    raise SystemExit(common.run_main(main))
