"""Train the stance task: `python experiments/stance.py --platform cpu|gpu --body simple ...`.

`--platform gpu` runs the fused JAX iteration (MuJoCo Warp); `--platform cpu` runs the CPU path
(`boxjax.rl.cpu.workers`: MuJoCo C collectors and JAX learners, serial or decoupled, see its flags).

Writes runs/<name>/metrics.jsonl (one JSON object per iteration) and checkpoints under
runs/<name>/checkpoints, and prints the time to solve when the curriculum is solved.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _cli  # noqa: E402

CPU_WORLDS = 64
"""Default worlds per collector on the CPU path."""
GPU_SHAPE = dict(num_envs=2048, unroll_length=16, minibatch_size=2048)
"""The GPU run's batch: 2,048 worlds x 16 steps, 16 minibatches (H200, 2026-12-02: with `STANCE_PPO` and
`STANCE_ENV` muscular-fast solved in 87.5 / 73.1 s, simple in 42.9 / 44.9 s with warm caches, two seeds
each; 1,024 x 32, the same batch, took 0.38 s per muscular-fast iteration against 0.19; docs/benchmarks.md).
`--envs`, `--unroll`, `--minibatch` override it."""
STANCE_PPO = {"init_log_std": -1.6, "desired_kl": 0.04}
"""PPO settings the stance solves fastest with (H200, 2026-12-01: with a one-episode window muscular-fast
1,024 x 32 solved in 111.9 / 104.9 s, simple 512 x 32 in 76.9 / 66.9 s, against 168.5 / 96.1 s with
`desired_kl` 0.02 and the library's window; docs/benchmarks.md). `--ppo` overrides them."""
STANCE_ENV = {"wait_episodes": 0.5}
"""Stance settings of those solves: the curriculum judges a window of half an episode per world (and at least
one finished episode; the library's default waits two episodes; a one-episode window took 350 iterations
against 325 for muscular-fast at `GPU_SHAPE`). `--env` overrides them."""


def ppo_config(args):
    """The run's PPOConfig: this platform's sizes and `STANCE_PPO`, then the command line's `--ppo` values."""
    from boxjax.rl import ppo

    if args.platform == "cpu":
        worlds = _cli.cpu_worlds(args, CPU_WORLDS)
        overrides = {**_cli.ppo_overrides(args), "num_envs": worlds}
        unroll = overrides.get("unroll_length", 16)
        sizes = dict(num_envs=worlds, unroll_length=unroll, minibatch_size=worlds * unroll // 4)
    else:
        sizes = GPU_SHAPE
        overrides = _cli.ppo_overrides(args)
    defaults = ppo.PPOConfig(**sizes, **STANCE_PPO)
    return ppo.PPOConfig(**{**defaults.to_dict(), **overrides})


RULES = ("fast", "seed")
"""`--rule`: "fast" judges each rise of the curriculum on `STANCE_ENV`'s half-episode window (our recipe);
"seed" waits the seed's two episodes per world before each rise (the library's default). Either way a solve
is the seed's rule: episodes begun at full amplitude, one per world, at most 5 % falling."""


def env_options(args) -> dict:
    """The run's StanceConfig fields: `STANCE_ENV` under `--rule fast`, then the command line's `--env`."""
    from boxjax.envs.stance.env import StanceConfig

    recipe = STANCE_ENV if args.rule == "fast" else {}
    return {**recipe, **_cli.field_values(args.env, StanceConfig())}


def effective_settings(config, options: dict) -> dict:
    """The run's shape and its values of every field the stance defaults set (`STANCE_PPO`, `STANCE_ENV`):
    what a summary needs to be read after the defaults change."""
    from boxjax.envs.stance.env import StanceConfig

    env = StanceConfig(**options)
    return {
        "worlds": config.num_envs,
        "unroll": config.unroll_length,
        **{name: getattr(config, name) for name in STANCE_PPO},
        **{name: getattr(env, name) for name in STANCE_ENV},
    }


def arguments(argv: list[str] | None = None):
    """The parsed command line."""
    parser = _cli.base_parser(__doc__)
    parser.add_argument("--keep-going", action="store_true", help="do not stop when solved")
    parser.add_argument(
        "--rule", choices=RULES, default="fast", help="curriculum window: fast (ours) or seed (2 episodes)"
    )
    parser.add_argument(
        "--factor",
        choices=("auto", "fused", "stock"),
        default="auto",
        help="MuJoCo Warp mass-matrix factorisation (auto: fused for the 89-DoF bodies)",
    )
    _cli.add_cpu_arguments(parser, CPU_WORLDS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train, report."""
    args = arguments(argv)

    from boxjax import platform

    platform.configure(args.platform, args.cache)
    _cli.mark("platform_configured")
    from boxjax.envs.stance.env import StanceConfig

    config = ppo_config(args)
    options = env_options(args)
    levels = StanceConfig(**options).levels
    name = args.name or f"stance-{args.body}-{args.platform}-{config.num_envs}"
    out = _cli.run_dir(name)
    level = (("curriculum/level", "amp {:.0f}/" + str(levels), "level"),)
    extra = level + (_cli.CPU_PROFILE if args.platform == "cpu" else ())
    progress = _cli.open_progress(args, out, extra)
    run = _cli.run_options(
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
        **_cli.summary_head(args, history),
        "rule": args.rule,
        "settings": effective_settings(config, options),
        "solved": result.solved_at_s is not None,
        "time_to_solve_s": result.solved_at_s,
        "train_s_to_solve": None
        if result.solved_at_s is None
        else result.solved_at_s - history[0]["setup_s"],
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    if result.solved_at_s is not None:
        print(
            f"SOLVED in {result.solved_at_s:.1f} s after {summary['iterations']} iterations "
            f"(set-up {summary['setup_s']:.1f} s, training {summary['train_s_to_solve']:.1f} s)"
        )
    print(json.dumps(summary))
    _cli.write_curves(out)
    return _cli.exit_status(result)


def train_cpu(args, config, options: dict, out: str, run):
    """The CPU path: collectors on MuJoCo C (`mujoco.batch`), learners with the GPU path's loss code."""
    import functools

    import jax

    from boxjax.envs.cpu import CpuEnv
    from boxjax.envs.stance.env import StanceConfig
    from boxjax.rl.cpu import workers

    layout = _cli.workers_config(args)
    stance_config = StanceConfig(body=args.body, **options)
    probe = CpuEnv(stance_config)
    print(
        f"stance: body={args.body} physics=mujoco-cpu worlds={config.num_envs} unroll={config.unroll_length} "
        f"obs={probe.observation_size} act={probe.action_size} -> {out}",
        flush=True,
    )
    _cli.mark("env_built")
    factory = functools.partial(CpuEnv, stance_config)
    return workers.train(factory, config, layout, jax.random.PRNGKey(args.seed), run)


def train_gpu(args, config, options: dict, out: str, run):
    """The fused JAX path (MuJoCo Warp on a GPU)."""
    import jax

    from boxjax import envs
    from boxjax.rl import ppo

    fused = {"auto": None, "fused": True, "stock": False}[args.factor]
    env = envs.make("stance", body=args.body, num_worlds=config.num_envs, fused_factor=fused, **options)
    print(
        f"stance: body={args.body} impl={env.backend.impl} worlds={config.num_envs} "
        f"unroll={config.unroll_length} obs={env.observation_size} act={env.action_size} -> {out}",
        flush=True,
    )
    _cli.mark("env_built")
    return ppo.train_run(env, config, jax.random.PRNGKey(args.seed), run)


if __name__ == "__main__":
    raise SystemExit(_cli.run_main(main))
