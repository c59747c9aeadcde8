"""How many iterations MuJoCo Warp's constraint solver runs per physics step in a task's world, a policy
acting: the share of world-steps that stopped after 1, 2, ... iterations (the last at the cap), how often the
slowest world of a batch needed each count, and the share of world-steps with a contact between two
kinematic trees (where the solver's Hessian is not block diagonal by tree). MuJoCo
Warp's solver loop (a CUDA while-node, or the cap's passes unrolled) runs until the batch's slowest world is
done, so that second figure is what a batch pays.

Each control step's count is its last physics substep's (`solver_niter`, read after the step). The policy is a
checkpoint or policy file's actions sampled as in training (`--policy`), or uniform random actions of
`--action-scale`. On a machine without a GPU MuJoCo Warp runs on Warp's CPU device (slow: a few worlds).

    python -m boxjax.bench.solver_iterations --policy boxjax/data/blockers/block-muscular.msgpack --worlds 8
    python -m boxjax.bench.solver_iterations --task block --body simple --policy random --steps 40
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

POLICY_RANDOM = "random"


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = bench_rows.parser(__doc__, "solver_iterations")
    p.add_argument("--policy", default=POLICY_RANDOM, help="a checkpoint or policy file, or 'random'")
    p.add_argument("--task", default="block", help="the task whose world runs (with --policy random)")
    p.add_argument("--body", default="muscular", help="the body (with --policy random)")
    p.add_argument("--worlds", type=int, default=8)
    p.add_argument("--steps", type=int, default=120, help="control steps from reset")
    p.add_argument("--action-scale", type=float, default=0.3, help="random actions' bound (of the range's 1)")
    p.add_argument("--seed", type=int, default=0)
    bench_rows.add_common_args(p)
    args = p.parse_args(argv)
    if args.worlds < 1 or args.steps < 1:
        p.error("--worlds and --steps must be at least 1")
    if args.policy != POLICY_RANDOM and not os.path.exists(args.policy):
        p.error(f"--policy {args.policy}: no such checkpoint or policy file (or 'random')")
    return args


def histogram(counts: np.ndarray, cap: int) -> list[int]:
    """How many entries of `counts` are 0, 1, ..., `cap` (a count above the cap is an error: it cannot be)."""
    counts = np.asarray(counts)
    if counts.size and int(counts.max()) > cap:
        raise ValueError(f"a solver ran {int(counts.max())} iterations, above its cap of {cap}")
    return np.bincount(counts.ravel().astype(np.int64), minlength=cap + 1).tolist()


def shares_table(counts: np.ndarray, cap: int) -> str:
    """Markdown: per iteration count, its share of world-steps and of control steps' slowest worlds.
    `counts` is (steps, worlds)."""
    per_world = histogram(counts, cap)
    slowest = histogram(np.asarray(counts).max(axis=1), cap)
    lines = ["| iterations | world-steps | control steps' slowest world |", "|---|---|---|"]
    world_steps, control_steps = max(sum(per_world), 1), max(sum(slowest), 1)
    for n in range(cap + 1):
        label = f"{n} (the cap)" if n == cap else str(n)
        lines.append(f"| {label} | {per_world[n] / world_steps:.1%} | {slowest[n] / control_steps:.1%} |")
    return "\n".join(lines)


def acting(args):
    """(env, params, act(state, key) -> actions) for the options: the policy file's network or random."""
    import jax

    from boxjax import envs

    if args.policy == POLICY_RANDOM:
        env = envs.make(args.task, body=args.body, impl="warp", num_worlds=args.worlds)

        def act(state, key):
            return args.action_scale * jax.random.uniform(
                key, state.obs.shape[:1] + (env.action_size,), minval=-1
            )

        return env, env.default_params(), act
    from boxjax.cli import watch
    from boxjax.models import checkpoint
    from boxjax.rl.rollout import network_policy
    from boxjax.rl.train_step import make_network

    meta = checkpoint.read_source_meta(args.policy)
    env, config, policy = watch.load(args.policy, meta, args.worlds, impl="warp")
    net = make_network(env, config)
    sampled = network_policy(net, policy.params, policy.normalizer, config.normalize_observations)
    return env, env.default_params(), lambda state, key: sampled(state.obs, key)[0]


def joined_trees(
    tree_of_geom: np.ndarray, geoms: np.ndarray, world_of: np.ndarray, worlds: int
) -> np.ndarray:
    """(worlds,) bool: whether a world has a contact between two kinematic trees, from its contacts' geom
    pairs `geoms` (n, 2), their worlds `world_of` (n,) and each geom's tree (-1: the world body)."""
    trees = tree_of_geom[geoms]
    across = (trees[:, 0] >= 0) & (trees[:, 1] >= 0) & (trees[:, 0] != trees[:, 1])
    joined = np.zeros(worlds, bool)
    joined[world_of[across]] = True
    return joined


def collect(env, params, act, worlds: int, steps: int, key) -> tuple[np.ndarray, np.ndarray]:
    """(steps, worlds) int and bool: the solver iterations of each world's last physics substep per control
    step, and whether a contact joined two trees then (the Hessian is not block diagonal by tree), from a
    reset of every world (episodes that end reset)."""
    import jax

    from boxjax.envs.wrappers import autoreset_step, batch_reset

    reset_key, key = jax.random.split(key)
    state = jax.jit(lambda k: batch_reset(env, params, k))(jax.random.split(reset_key, worlds))
    step = jax.jit(lambda s, k: autoreset_step(env, params, s, s, act(s, k))[1])
    model = env.mj_model
    tree_of_geom = model.body_treeid[model.geom_bodyid]
    counts, joined = [], []
    for k in jax.random.split(key, steps):
        state = step(state, k)
        impl = state.data._impl
        counts.append(np.asarray(impl.solver_niter).reshape(worlds, -1)[:, 0])
        n = int(np.asarray(impl.nacon).reshape(-1)[0])
        geoms = np.asarray(impl.contact__geom).reshape(-1, 2)[:n]
        joined.append(
            joined_trees(tree_of_geom, geoms, np.asarray(impl.contact__worldid).reshape(-1)[:n], worlds)
        )
    return np.stack(counts), np.stack(joined)


def main(argv: list[str] | None = None) -> int:
    """Count, print the table."""
    args = parse(argv)
    from boxjax import platform

    platform.configure("gpu" if bench_rows.has_gpu() else "cpu")
    import jax

    env, params, act = acting(args)
    cap = int(env.mj_model.opt.iterations)
    counts, joined = collect(env, params, act, args.worlds, args.steps, jax.random.PRNGKey(args.seed))
    who = f"random actions (bound {args.action_scale})" if args.policy == POLICY_RANDOM else args.policy
    print(
        f"{who} in {type(env).__name__}, body {env.config.body}, "
        f"{args.worlds} worlds x {args.steps} control steps, solver cap {cap}, tolerance "
        f"{env.mj_model.opt.tolerance:g}, on {bench_rows.device_name()}: {counts.mean():.2f} a step"
    )
    print(shares_table(counts, cap))
    print(f"world-steps with a contact between two kinematic trees: {joined.mean():.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
