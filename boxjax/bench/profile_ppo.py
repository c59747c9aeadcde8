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
import datetime
import json
import os
import shlex
import sys
import time
from typing import Any

from boxjax.cli.common import Parser, field_values, run_main


def time_parts(env_name: str, env_config: Any, brax: dict[str, Any], config: Any, repeats: int) -> list:
    """[(framework, metric, value, unit)] of every part (see the module docstring)."""
    import jax
    import jax.numpy as jnp
    from brax.envs.wrappers import training as brax_wrappers
    from mujoco_playground import registry, wrapper

    from boxjax.bench.rows import timed
    from boxjax.envs import from_playground
    from boxjax.envs.base import quiet_models
    from boxjax.envs.wrappers import autoreset_step, batch_reset
    from boxjax.rl import ppo
    from boxjax.rl.rollout import init_rollout, network_policy, rollout
    from boxjax.rl.train_step import (
        init_train_state,
        make_batch,
        make_network,
        make_train_iteration,
        update,
    )

    worlds, unroll = config.num_envs, config.unroll_length
    key = jax.random.PRNGKey(0)
    keys = jax.random.split(key, worlds)
    raw = registry.load(env_name, config=env_config)
    quiet_models(raw)  # as boxjax's adapter does: no device printf per world (solver caps) in any part
    zeros = jnp.zeros((worlds, raw.action_size), jnp.float32)
    out = []

    def scanned(step):
        return jax.jit(lambda s: jax.lax.scan(lambda c, _: (step(c), None), s, None, length=unroll)[0])

    bare = jax.jit(jax.vmap(raw.reset))(keys)
    _, best, _ = timed(scanned(lambda s: jax.vmap(raw.step)(s, zeros)), bare, repeats=repeats)
    out.append(("brax", "physics_steps_per_s", worlds * unroll / best, "1/s"))

    wrapped = wrapper.wrap_for_brax_training(
        raw, episode_length=brax["episode_length"], action_repeat=brax["action_repeat"]
    )
    brax_state = jax.jit(wrapped.reset)(keys)
    _, best, _ = timed(scanned(lambda s: wrapped.step(s, zeros)), brax_state, repeats=repeats)
    out.append(("brax", "brax_env_step_ms", 1e3 * best / unroll, "ms"))

    env = from_playground(brax_wrappers.EpisodeWrapper(raw, brax["episode_length"], brax["action_repeat"]))
    reset = jax.jit(lambda k: batch_reset(env, None, k))
    _, best, first = timed(reset, keys, repeats=repeats)
    out.append(("boxjax", "reset_ms", 1e3 * best, "ms"))
    _, best, _ = timed(
        scanned(lambda s: autoreset_step(env, None, s, first, zeros)[0]), first, repeats=repeats
    )
    out.append(("boxjax", "env_step_ms", 1e3 * best / unroll, "ms"))

    net = make_network(env, config)
    ts = init_train_state(env, config, key)
    every = config.reset_every
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

    iteration = make_train_iteration(env, config)
    ts, rs = ppo.own_buffers((ts, rs))
    for _ in range(2):  # compile, then the donated buffers' other set
        ts, rs, metrics = jax.block_until_ready(iteration(ts, rs, None))
    calls = every * -(-repeats // every)  # whole cycles of the reset pool: each holds one draw
    tick = time.perf_counter()
    for _ in range(calls):  # each read back before the next, as training reads its figures
        ts, rs, metrics = jax.block_until_ready(iteration(ts, rs, None))
    mean = (time.perf_counter() - tick) / calls
    out.append(("boxjax", "s_per_iteration", mean, "s"))
    out.append(("boxjax", "steps_per_s", worlds * unroll * brax["action_repeat"] / mean, "1/s"))
    return out


def parser() -> Parser:
    """The command line."""
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env", metavar="ENV", help="a MuJoCo Playground environment, e.g. CheetahRun")
    p.add_argument("--platform", choices=("cpu", "gpu"), default="gpu", help="where JAX runs")
    p.add_argument("--repeats", type=int, default=5, help="timed calls of each part (best kept)")
    p.add_argument("--brax", action="append", default=[], metavar="KEY=VALUE", help="a Brax config key")
    p.add_argument("--ppo", action="append", default=[], metavar="FIELD=VALUE", help="boxjax PPOConfig")
    p.add_argument(
        "--env-config", action="append", default=[], metavar="KEY=VALUE", help="environment config"
    )
    p.add_argument("--out", default=os.path.join("results", "bench"), help="folder of the rows")
    p.add_argument("--cache", default=None, help="cache folder for compiled code (default $BOXJAX_CACHE)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return p


def main(argv: list[str] | None = None) -> int:
    """Time every part of the iteration on ENV; print the table and append the rows."""
    args = parser().parse_args(argv)
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    from boxjax import platform

    platform.configure(args.platform, args.cache)
    from mujoco_playground import registry

    from boxjax.bench import brax as compare_brax
    from boxjax.bench import rows as bench_rows

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
    device = bench_rows.device_name()
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    command = "python experiments/profile_ppo.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    labels = {
        "bench": "profile", "device": device, "env": args.env, "task": args.env, "body": None,
        "worlds": config.num_envs, "unroll": config.unroll_length, "reset_every": config.reset_every,
        "restart_on_draw": config.restart_on_draw,
        "caches": "warm", "brax_shims": shims,
        "ppo_overrides": args.ppo, "brax_overrides": args.brax, "env_overrides": args.env_config,
        "commit": bench_rows.commit(), "date": date,
        "versions": {**bench_rows.versions(), **compare_brax.compare_versions()}, "command": command,
    }  # fmt: skip
    if args.platform == "cpu":
        labels["cores"] = os.cpu_count()
    rows = [{**labels, "framework": f, "metric": m, "value": v, "unit": u} for f, m, v, u in parts]
    path = bench_rows.rows_path(args.out, "profile", device, date)
    with open(path, "a") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    for row in rows:
        print(f"{args.env:<14} {row['framework']:>7} {row['metric']:<20} {row['value']:14,.3f} {row['unit']}")
    print(f"rows -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
