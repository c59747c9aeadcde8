"""Where boxjax PPO's iteration goes on a MuJoCo Playground environment, next to Brax's environment layer:

    python experiments/profile_ppo.py ENV [--platform gpu] [--repeats 5] [--ppo FIELD=VALUE ...]
        [--brax KEY=VALUE ...] [--env-config KEY=VALUE ...]
    python -m boxjax.bench.profile_ppo ENV ...        # the same

ENV, the worlds, unroll and PPO settings are those `compare_brax.py` trains (the Playground's published
configuration, matched by `boxjax.rl.presets.from_brax`). Each part is jitted on its own and timed warm (best
of `--repeats`, the iteration's mean), on the same worlds:

- `physics_steps_per_s`: the bare environment step (Playground `step`, vmapped, `unroll` steps of zero
  actions, no episode wrapper, no reset): the floor both frameworks share. Every part steps the quiet
  model (`boxjax.envs.base.quiet_models`: MuJoCo Warp prints no warning per world and step).
- `brax_env_step_ms` (framework brax): the environment as Brax's PPO steps it
  (`mujoco_playground.wrapper.wrap_for_brax_training`: episode limit and auto-reset to a cached first state).
- `env_step_ms` (boxjax): the same environment through `boxjax.envs.from_playground` and
  `boxjax.envs.wrappers.autoreset_step` (non-finite guard, overflow figures, reset by mask).
- `reset_ms`: boxjax's reset of every world, which its rollout draws once per `reset_every` iterations.
- `rollout_ms`: boxjax's whole rollout (policy, environment, episode totals, the draw of reset states
  when `reset_every` is 1; with more, a rollout that reuses its pool).
- `gae_ms`: values of the unroll, GAE and the flat batch (with the "unrolls" batch layout, only the unrolls'
  layout: the advantages are computed in the update's loss); `update_ms`: epochs x minibatches of updates.
- `s_per_iteration`, `steps_per_s`: the fused iteration (`make_train_iteration`) as training runs it:
  the mean over whole cycles of the reset pool (at least `--repeats` iterations, each read back).

Rows: `results/bench/profile-DEVICE-DATE.jsonl`, a table on the console.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from boxjax.bench import brax as compare_brax
from boxjax.bench import rows as bench_rows
from boxjax.bench.rows import timed
from boxjax.cli.common import Parser, field_values, run_main


def time_parts(env_name: str, env_config: Any, brax: dict[str, Any], config: Any, repeats: int) -> list:
    """[(framework, metric, value, unit)] of every part (see the module docstring)."""
    import jax
    import jax.numpy as jnp
    from brax.envs.wrappers import training as brax_wrappers
    from mujoco_playground import registry

    from boxjax.envs import from_playground
    from boxjax.envs.base import quiet_models

    worlds = config.num_envs
    key = jax.random.PRNGKey(0)
    keys = jax.random.split(key, worlds)
    raw = registry.load(env_name, config=env_config)
    quiet_models(raw)  # as boxjax's adapter does: no device printf per world (solver caps) in any part
    zeros = jnp.zeros((worlds, raw.action_size), jnp.float32)
    out = brax_parts(raw, brax, keys, zeros, config.unroll_length, repeats)
    env = from_playground(brax_wrappers.EpisodeWrapper(raw, brax["episode_length"], brax["action_repeat"]))
    return out + boxjax_parts(env, brax, config, key, keys, zeros, repeats)


def scanned(step, unroll: int):
    """`step` applied `unroll` times in a jitted `lax.scan`."""
    import jax

    return jax.jit(lambda s: jax.lax.scan(lambda c, _: (step(c), None), s, None, length=unroll)[0])


def brax_parts(raw: Any, brax: dict[str, Any], keys, zeros, unroll: int, repeats: int) -> list:
    """The bare environment step and the environment as Brax's PPO steps it, zero actions `zeros`."""
    import jax
    from mujoco_playground import wrapper

    worlds = zeros.shape[0]
    bare = jax.jit(jax.vmap(raw.reset))(keys)
    _, best, _ = timed(scanned(lambda s: jax.vmap(raw.step)(s, zeros), unroll), bare, repeats=repeats)
    out = [("brax", "physics_steps_per_s", worlds * unroll / best, "1/s")]
    wrapped = wrapper.wrap_for_brax_training(
        raw, episode_length=brax["episode_length"], action_repeat=brax["action_repeat"]
    )
    brax_state = jax.jit(wrapped.reset)(keys)
    _, best, _ = timed(scanned(lambda s: wrapped.step(s, zeros), unroll), brax_state, repeats=repeats)
    return out + [("brax", "brax_env_step_ms", 1e3 * best / unroll, "ms")]


def boxjax_parts(env: Any, brax: dict[str, Any], config: Any, key, keys, zeros, repeats: int) -> list:
    """boxjax's parts on `env` (the Playground environment in Brax's episode wrapper): reset, env step,
    rollout, GAE and batch, update, then the fused iteration."""
    import jax

    from boxjax.envs.wrappers import autoreset_step, batch_reset
    from boxjax.rl.rollout import init_rollout, network_policy, rollout
    from boxjax.rl.train_step import init_train_state, make_batch, make_network, update

    worlds, unroll, every = config.num_envs, config.unroll_length, config.reset_every
    _, best, first = timed(jax.jit(lambda k: batch_reset(env, None, k)), keys, repeats=repeats)
    out = [("boxjax", "reset_ms", 1e3 * best, "ms")]
    step = scanned(lambda s: autoreset_step(env, None, s, first, zeros)[0], unroll)
    _, best, _ = timed(step, first, repeats=repeats)
    out.append(("boxjax", "env_step_ms", 1e3 * best / unroll, "ms"))
    net = make_network(env, config)
    ts = init_train_state(env, config, key)
    rs = jax.jit(lambda k: init_rollout(env, None, k, worlds, reset_every=every))(key)
    normalize = config.normalize_observations

    @jax.jit
    def collect(ts, rs, k):
        return rollout(
            env, None, network_policy(net, ts.params, ts.normalizer, normalize), rs, k, unroll,
            reset_every=every, restart_on_draw=config.restart_on_draw,
        )  # fmt: skip

    if every > 1:  # a pool just drawn: the timed rollouts reuse it (its draw is `reset_ms`)
        rs = collect(ts, rs, key)[0]
    _, best, (_, traj, _, _) = timed(collect, ts, rs, key, repeats=repeats)
    out.append(("boxjax", "rollout_ms", 1e3 * best, "ms"))
    batch_fn = jax.jit(lambda ts, traj: make_batch(net, config, ts.params, ts.normalizer, traj))
    _, best, batch = timed(batch_fn, ts, traj, repeats=repeats)
    out.append(("boxjax", "gae_ms", 1e3 * best, "ms"))
    update_fn = jax.jit(lambda ts, b, k: update(net, config, ts, b, k)[:3])
    _, best, _ = timed(update_fn, ts, batch, key, repeats=repeats)
    out.append(("boxjax", "update_ms", 1e3 * best, "ms"))
    return out + iteration_parts(env, config, ts, rs, brax["action_repeat"], repeats)


def iteration_parts(env: Any, config: Any, ts, rs, action_repeat: int, repeats: int) -> list:
    """The fused iteration as training runs it: the mean over whole cycles of the reset pool (at least
    `repeats` iterations, each read back), and its steps/s."""
    import jax

    from boxjax.rl import ppo
    from boxjax.rl.train_step import make_train_iteration

    every = config.reset_every
    iteration = make_train_iteration(env, config)
    ts, rs = ppo.own_buffers((ts, rs))
    for _ in range(2):  # compile, then the donated buffers' other set
        ts, rs, metrics = jax.block_until_ready(iteration(ts, rs, None))
    calls = every * -(-repeats // every)  # whole cycles of the reset pool: each holds one draw
    tick = time.perf_counter()
    for _ in range(calls):  # each read back before the next, as training reads its figures
        ts, rs, metrics = jax.block_until_ready(iteration(ts, rs, None))
    mean = (time.perf_counter() - tick) / calls
    steps_per_s = config.num_envs * config.unroll_length * action_repeat / mean
    return [("boxjax", "s_per_iteration", mean, "s"), ("boxjax", "steps_per_s", steps_per_s, "1/s")]


def parser() -> Parser:
    """The command line."""
    p = bench_rows.parser(__doc__, "profile_ppo")
    p.add_argument("env", metavar="ENV", help="a MuJoCo Playground environment, e.g. CheetahRun")
    p.add_argument("--repeats", type=int, default=5, help="timed calls of each part (best kept)")
    compare_brax.add_override_arguments(p)
    bench_rows.add_common_args(p, out=True, platform="gpu", cache=True)
    return p


def main(argv: list[str] | None = None) -> int:
    """Time every part of the iteration on ENV; print the table and append the rows."""
    args = parser().parse_args(argv)
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    from boxjax import platform

    platform.configure(args.platform, args.cache)
    from mujoco_playground import registry

    shims = compare_brax.brax_compat()
    brax = compare_brax.published_config(args.env)
    compare_brax.override(brax, args.brax, "--brax")
    settings = brax.to_dict()
    from boxjax.rl import presets
    from boxjax.rl.config import PPOConfig

    config = presets.from_brax(settings, field_values(args.ppo, PPOConfig()))
    env_config = registry.get_default_config(args.env)
    compare_brax.override(env_config, args.env_config, "--env-config")
    compare_brax.observations_are_flat(registry.load(args.env, config=env_config))
    parts = time_parts(args.env, env_config, settings, config, args.repeats)
    rows = [{"framework": f, "metric": m, "value": v, "unit": u} for f, m, v, u in parts]
    common = labels(args, config, shims, argv)
    path = bench_rows.rows_path(args.out, "profile", common["device"], common["date"])
    for row in bench_rows.write_rows(path, rows, common):
        print(f"{args.env:<14} {row['framework']:>7} {row['metric']:<20} {row['value']:14,.3f} {row['unit']}")
    print(f"rows -> {path}")
    return 0


def labels(args: argparse.Namespace, config: Any, shims: list[str], argv: list[str] | None) -> dict:
    """What every row names besides its framework and figure."""
    labels = {
        "bench": "profile", "device": bench_rows.device_name(), "env": args.env, "task": args.env,
        "body": None, "worlds": config.num_envs, "unroll": config.unroll_length,
        "reset_every": config.reset_every, "restart_on_draw": config.restart_on_draw,
        "caches": "warm", "brax_shims": shims,
        "ppo_overrides": args.ppo, "brax_overrides": args.brax, "env_overrides": args.env_config,
        "commit": bench_rows.commit(), "date": bench_rows.now(),
        "versions": {**bench_rows.versions(), **compare_brax.compare_versions()},
        "command": bench_rows.command("python experiments/profile_ppo.py", argv),
    }  # fmt: skip
    if args.platform == "cpu":
        labels["cores"] = os.cpu_count()
    return labels


if __name__ == "__main__":
    raise SystemExit(run_main(main))
