"""Train the block task (mixed episodes): `boxjax train --task block --platform gpu|cpu --body simple ...`.

--platform gpu   the fused JAX iteration on the GPU with MuJoCo Warp; by default the seed's shape:
                 2,048 worlds x 16 steps, then 4 epochs of minibatch 2,048.
--platform cpu   the CPU path (`boxjax.rl.cpu.workers`): collectors step the block task on MuJoCo's C engine
                 (`boxjax.envs.block.cpu`: the same JAX task code around `mujoco.batch` physics), learners
                 run the PPO update; serial or decoupled (--mode, --collectors, --worlds, --learners...).
                 Tiny by default: 8 worlds per collector x 8 steps. The teacher runs in the collectors.
                 --mode fused runs the GPU path's fused JAX iteration on the CPU instead (MJX's JAX
                 physics, --envs worlds; about 10x slower per step, for comparisons and tests).

--teacher auto|none|PATH  the walking teacher run beside the policy (policy distillation of the
                 leg actions, weight `--ppo distill_coef=...`, default `boxjax.envs.block.training.
                 DISTILL_COEF` with a teacher): auto takes the one shipped for the body
                 (boxjax/data/teachers) if there is one, PATH a teacher file or a walk checkpoint directory.

--init CHECKPOINT starts from a model: a block checkpoint of the same body, observation size and network
(else refused, naming what differs), or a stance checkpoint of the same body and network, whose first
layers are mapped onto the block observation (`boxjax.envs.block.from_stance`, through
`boxjax.rl.init_from`); the converted checkpoint is written to runs/<name>/init-from-stance. --resume PATH
continues a block run (--init is then ignored): exactly on the fused path; on the CPU path the model,
optimiser and key continue and the episodes restart.

Writes runs/<name>/metrics.jsonl (one JSON object per iteration, with per-iteration counts `count/*`),
checkpoints under runs/<name>/checkpoints and runs/<name>/summary.json.
"""

from __future__ import annotations

import json
import os

from boxjax import runs
from boxjax.cli import common
from boxjax.envs.block import training


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train, report."""
    parser = common.base_parser(__doc__, "boxjax train --task block")
    parser.epilog = runs.progress_legend(training.PROGRESS + runs.CPU_PROFILE + training.SELF_PLAY_PROGRESS)
    common.add_warp_arguments(parser)
    parser.add_argument("--teacher", default="auto", help="auto | none | teacher file or walk checkpoint dir")
    parser.add_argument(
        "--graph-mode",
        default=None,
        help="MuJoCo Warp's CUDA graph mode, one of boxjax.physics.mjx.GRAPH_MODES (default: MJX's)",
    )
    common.add_cpu_arguments(parser, training.CPU_WORLDS, fused=True)
    args = parser.parse_args(argv)
    common.check_warp_arguments(parser, args)
    if args.graph_mode and args.platform != "gpu":
        parser.error("--graph-mode applies to --platform gpu only (MuJoCo Warp's CUDA graphs)")

    from boxjax import platform

    platform.configure(args.platform, args.cache)
    runs.mark("platform_configured")
    from boxjax.models import checkpoint
    from boxjax.rl import init_from

    on_workers = args.platform == "cpu" and args.mode != "fused"
    config, env, devices = build_cpu(args) if on_workers else build(args)
    task = env.task if on_workers else env  # the BlockEnv: observation layout and params for --init
    name = args.name or f"block-{args.body}-{args.platform}-{config.num_envs}"
    common.check_init(args)
    out = runs.run_dir(name)
    try:
        init = None if args.resume else init_from.prepare_init(args.init, task, config, out, args.seed)
    except checkpoint.CheckpointMismatchError as error:
        raise checkpoint.CheckpointMismatchError(f"--init {args.init}: {error}") from None
    physics = "physics=mujoco-cpu" if on_workers else f"impl={env.backend.impl}"
    print(
        f"block: body={args.body} {physics} worlds={config.num_envs} devices={devices} "
        f"unroll={config.unroll_length} obs={env.observation_size} act={env.action_size} "
        f"opponent={task.config.opponent} kinds={task.config.kind_weights} "
        f"teacher={task.config.teacher or 'none'} "
        f"distill_coef={config.distill_coef} -> {out}",
        flush=True,
    )
    runs.mark("env_built_init_prepared")
    extra = training.PROGRESS + (runs.CPU_PROFILE if on_workers else ())
    if task.config.opponent_policy == "learned":
        extra += training.SELF_PLAY_PROGRESS
    progress = runs.open_progress(args, out, extra)
    run = common.run_options(
        args,
        out,
        progress_fn=lambda figures: progress(training.add_counts(figures, config.batch_size)),
        init=init,
    )
    try:
        result, history = (
            train_cpu(args, config, task.config, run) if on_workers else train(args, config, env, run)
        )
    finally:
        progress.close()
    if not history:
        print("nothing to do: the checkpoint already reached --iterations")
        return 0
    write_summary(out, args, history, "none" if on_workers else factor_trees(env))
    runs.write_curves(out)
    return common.exit_status(result)


def train(args, config, env, run):
    """The fused JAX iteration (`ppo.train_run`); returns its result and the per-iteration figures."""
    import jax

    from boxjax.rl import ppo

    return ppo.train_run(env, config, jax.random.PRNGKey(args.seed), run)


def train_cpu(args, config, block_config, run):
    """The CPU path (`boxjax.rl.cpu.workers`): collectors of `boxjax.envs.cpu.CpuEnv` worlds, learners
    with the GPU path's loss code; returns its result and the per-iteration figures."""
    import functools

    import jax

    from boxjax.envs.cpu import CpuEnv
    from boxjax.rl.cpu import workers

    factory = functools.partial(CpuEnv, block_config)
    return workers.train(factory, config, common.workers_config(args), jax.random.PRNGKey(args.seed), run)


def task_fields(args) -> dict:
    """`BlockConfig` fields from `--env` and `--teacher` (the teacher named once)."""
    from boxjax.envs.block.env import BlockConfig

    fields = common.field_values(args.env, BlockConfig())
    if "teacher" in fields and args.teacher != "auto":
        raise ValueError("name the teacher once, with --teacher or --env teacher=..., not both")
    fields.setdefault("teacher", teacher_source(args.teacher, args.body))
    return fields


def build(args):
    """(PPOConfig, BlockEnv, device count) from the arguments: the platform's defaults, then overrides."""
    from boxjax import envs
    from boxjax.rl import sharding

    fields = task_fields(args)
    defaults = training.fused_ppo_defaults(args.platform, teacher=bool(fields["teacher"]))
    config = common.ppo_config({**defaults, **common.ppo_overrides(args)})
    devices = len(sharding.resolve_devices(config.num_devices))
    env = envs.make(
        "block",
        body=args.body,
        impl="warp" if args.platform == "gpu" else "jax",
        num_worlds=sharding.worlds_per_device(config, devices),
        **common.warp_options(args),
        graph_mode=args.graph_mode,
        **fields,
    )
    return config, env, devices


def build_cpu(args):
    """(PPOConfig, the block task's `boxjax.envs.cpu.CpuEnv` of one world, 1) for the CPU path: its
    defaults (`training.ppo_defaults`: with a teacher the collectors record its targets and the learners
    distil them), then the overrides."""
    from boxjax.envs.block.env import BlockConfig
    from boxjax.envs.cpu import CpuEnv

    fields = task_fields(args)
    worlds = common.cpu_worlds(args, training.CPU_WORLDS)
    overrides = {**common.ppo_overrides(args), "num_envs": worlds}
    defaults = training.workers_ppo_defaults(worlds, overrides.get("unroll_length"), bool(fields["teacher"]))
    config = common.ppo_config({**defaults, **overrides})
    return config, CpuEnv(BlockConfig(body=args.body, **fields)), 1


def teacher_source(choice: str, body: str) -> str:
    """`BlockConfig.teacher` for `--teacher`: auto -> 'shipped' if the package has one for `body`."""
    from boxjax.envs.walk import teacher

    if choice == "none":
        return ""
    if choice != "auto":
        return choice
    try:
        teacher.shipped_teacher(body)
    except FileNotFoundError:
        return ""
    return "shipped"


def factor_trees(env) -> str:
    """Which trees our factorisation takes in `env`'s world (`boxjax.physics.mjx.factor_trees`)."""
    from boxjax.physics import mjx as physics

    return physics.factor_trees(env.mj_model, env.backend.config)


def write_summary(out: str, args, history: list[dict], trees: str) -> None:
    """runs/<name>/summary.json (and printed): set-up time, iterations, which trees our factorisation took
    (`factor_trees`), the solver loop and launch block sizes asked for, first and last figures."""
    summary = {
        **runs.summary_head(args, history),
        "factor_trees": trees,
        "solver_loop": args.solver_loop or "default",
        "block_dims": dict(common.block_dims(args.block_dim)),
        "init": args.init,
        **training.summary(history),
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary))


if __name__ == "__main__":
    raise SystemExit(common.run_main(main))
