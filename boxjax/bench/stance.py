"""`make bench`: physics, env step, update and whole-iteration speed, per body, task and world count.

On a GPU it measures at 1,024 / 2,048 / 4,096 / 8,192 worlds with MuJoCo Warp; on a CPU-only machine a
small version of the same table (MJX's JAX implementation, the simple body, few worlds). Every figure is
taken after a warm-up, blocking on the result before the clock stops. Rows go to
results/bench/<bench>-<device>-<date>.jsonl; a markdown table with dollars per 1,000 iterations and per
million steps (prices from boxjax/bench/prices.json) is printed. (`python -m boxjax.bench.stance`)
"""

from __future__ import annotations

import argparse
import itertools
import os
import time

from boxjax.bench import rows as bench_rows
from boxjax.cli import common as cli_common


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = bench_rows.parser(__doc__, "stance")
    bench_rows.add_common_args(p, out=True, platform="auto", cache=True, price=True)
    p.add_argument("--bodies", default=None, help="comma list (default: all on GPU, simple on CPU)")
    bench_rows.add_worlds(
        p, None, "comma list of world counts (default: 1,024 to 8,192 on GPU, 16,64 on CPU)"
    )
    p.add_argument("--unroll", type=int, default=16, help="control steps per iteration")
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions after warm-up")
    cli_common.add_warp_arguments(p)
    p.add_argument(
        "--devices",
        default="1",
        help="comma list of device counts (N or all) the worlds are split over; >1 times the iteration only",
    )
    return p.parse_args(argv)


def measure(
    body: str, worlds: int, unroll: int, repeats: int, factor: dict, devices: int = 1
) -> list[tuple[str, float, str]]:
    """All stance figures of one body at one world count: [(metric, value, unit)]; `factor` holds
    `envs.make`'s factorisation arguments (`cli.common.warp_options`).

    With `devices` > 1 the worlds are split over that many devices (`boxjax.rl.sharding`) and only the
    whole iteration is timed (set-up, compile, s/iteration, steps/s, overflow).
    """
    if devices > 1:
        return measure_sharded(body, worlds, unroll, repeats, factor, devices)
    import jax

    from boxjax import envs
    from boxjax.rl import ppo
    from boxjax.rl.rollout import init_rollout

    tick = time.perf_counter()
    env = envs.make("stance", body=body, num_worlds=worlds, **factor)
    params = env.default_params()
    minibatch = min(2048, worlds * unroll)
    config = ppo.PPOConfig(num_envs=worlds, unroll_length=unroll, minibatch_size=minibatch)
    key = jax.random.PRNGKey(0)
    rs = init_rollout(env, params, key, worlds)
    jax.block_until_ready(rs)
    build = [("model_build_s", time.perf_counter() - tick, "s")]
    steps, best_env = step_rows(env, params, rs.env, worlds, unroll, repeats)
    return build + steps + iteration_rows(env, config, params, key, rs, best_env, repeats)


def step_rows(
    env, params, first_state, worlds: int, unroll: int, repeats: int
) -> tuple[list[tuple[str, float, str]], float]:
    """The physics alone and the env step, `unroll` steps of all `worlds` from the batched reset state
    `first_state` (zero actions, auto-reset to it): ([physics steps/s, env step ms, the env step against the
    physics], best seconds of the env's `unroll` steps)."""
    import jax
    import jax.numpy as jnp

    from boxjax.envs.wrappers import autoreset_step
    from boxjax.physics import mjx as physics

    @jax.jit
    def physics_only(data, model):
        def body_fn(d, _):
            return jax.vmap(lambda x: physics.step(model, x, env.substeps))(d), None

        return jax.lax.scan(body_fn, data, None, length=unroll)[0]

    _, best, _ = bench_rows.timed(physics_only, first_state.data, params.model, repeats=repeats)
    physics_steps_per_s = worlds * unroll * env.substeps / best
    zero_action = jnp.zeros((worlds, env.action_size), jnp.float32)

    @jax.jit
    def env_only(state, p):
        def body_fn(s, _):
            return autoreset_step(env, p, s, first_state, zero_action)[0], None

        return jax.lax.scan(body_fn, state, None, length=unroll)[0]

    _, best_env, _ = bench_rows.timed(env_only, first_state, params, repeats=repeats)
    rows = [
        ("physics_steps_per_s", physics_steps_per_s, "1/s"),
        ("env_step_ms", 1e3 * best_env / unroll, "ms"),
        ("env_step_vs_physics", (best_env / (worlds * unroll * env.substeps)) * physics_steps_per_s, "x"),
    ]
    return rows, best_env


def iteration_rows(
    env, config, params, key, rs, best_env: float, repeats: int
) -> list[tuple[str, float, str]]:
    """The fused iteration from the rollout state `rs`: compile, graph captures and fused factorisations per
    iteration, s/iteration (best of `repeats`), steps/s, the update (iteration less the env steps' `best_env`
    seconds) and overflowing worlds."""
    import jax

    from boxjax.physics import graphs
    from boxjax.rl import ppo
    from boxjax.rl.train_step import init_train_state, make_train_iteration

    worlds, unroll = config.num_envs, config.unroll_length
    ts = init_train_state(env, config, key)
    iteration = make_train_iteration(env, config)
    ts, rs = ppo.own_buffers((ts, rs))
    tick = time.perf_counter()
    ts, rs, metrics = iteration(ts, rs, params)
    jax.block_until_ready(metrics)
    rows = [("compile_s", time.perf_counter() - tick, "s")]
    ts, rs, metrics = jax.block_until_ready(iteration(ts, rs, params))  # the donated buffers' other set
    engine_before = graphs.snapshot()
    best_it = float("inf")
    for _ in range(repeats):
        tick = time.perf_counter()
        ts, rs, metrics = iteration(ts, rs, params)
        jax.block_until_ready(metrics)
        best_it = min(best_it, time.perf_counter() - tick)
    engine = graphs.since(engine_before)
    rows.append(("graph_captures", engine[graphs.GRAPH_CAPTURES] / repeats, "graphs/iteration"))
    rows.append(("fused_factorizations", engine[graphs.FUSED_FACTORIZATIONS] / repeats, "worlds/iteration"))
    rows.append(("s_per_iteration", best_it, "s"))
    rows.append(("steps_per_s", worlds * unroll / best_it, "1/s"))
    rows.append(("update_ms", 1e3 * max(best_it - best_env, 0.0), "ms"))
    return rows + [("overflow_worlds", bench_rows.overflow_worlds(metrics), "worlds")]


def measure_sharded(
    body: str, worlds: int, unroll: int, repeats: int, factor: dict, devices: int
) -> list[tuple[str, float, str]]:
    """Whole-iteration figures with the worlds split over `devices` devices."""
    import jax

    from boxjax import envs
    from boxjax.rl import ppo, sharding
    from boxjax.rl.train_step import init_train_state

    rows = []
    tick = time.perf_counter()
    minibatch = min(2048, worlds * unroll)
    config = ppo.PPOConfig(
        num_envs=worlds, unroll_length=unroll, minibatch_size=minibatch, num_devices=devices
    )
    per_device = sharding.worlds_per_device(config, devices)
    env = envs.make("stance", body=body, num_worlds=per_device, **factor)
    key = jax.random.PRNGKey(0)
    dp = sharding.DataParallel(env, config, env.default_params(), sharding.resolve_devices(devices))
    ts, rs = dp.replicate(init_train_state(env, config, key)), dp.init_rollout(key)
    jax.block_until_ready(rs)
    rows.append(("model_build_s", time.perf_counter() - tick, "s"))
    tick = time.perf_counter()
    ts, rs, metrics = dp.iteration(ts, rs, dp.env_params)
    jax.block_until_ready(metrics)
    rows.append(("compile_s", time.perf_counter() - tick, "s"))
    best_it = float("inf")
    for _ in range(repeats):
        tick = time.perf_counter()
        ts, rs, metrics = dp.iteration(ts, rs, dp.env_params)
        jax.block_until_ready(metrics)
        best_it = min(best_it, time.perf_counter() - tick)
    rows.append(("s_per_iteration", best_it, "s"))
    rows.append(("steps_per_s", worlds * unroll / best_it, "1/s"))
    rows.append(("overflow_worlds", bench_rows.overflow_worlds(metrics), "worlds"))
    return rows


def markdown(rows: list[dict], price: tuple[str, float] | None) -> str:
    """The printed table: one line per body and world count."""
    table: dict[tuple[str, int, int], dict[str, float]] = {}
    for r in rows:
        table.setdefault((r["body"], r["worlds"], r.get("devices", 1)), {})[r["metric"]] = r["value"]
    head = "| body | worlds | devices | physics steps/s | env step ms | s/iteration | steps/s | update ms |"
    head += " compile s | $/1k it | $/M steps |\n|" + "---|" * 11
    lines = [head]
    nan = float("nan")
    for (body, worlds, devices), m in sorted(table.items()):
        if price:
            per_it = m["s_per_iteration"] * 1000 / 3600 * price[1] * devices
            per_m = 1e6 / m["steps_per_s"] / 3600 * price[1] * devices
            dollars = f"{per_it:.3f} | {per_m:.4f}"
        else:
            dollars = "n/a | n/a"
        lines.append(
            f"| {body} | {worlds} | {devices} | {m.get('physics_steps_per_s', nan):,.0f} | "
            f"{m.get('env_step_ms', nan):.2f} | {m['s_per_iteration']:.3f} | {m['steps_per_s']:,.0f} | "
            f"{m.get('update_ms', nan):.1f} | "
            f"{m['compile_s']:.1f} | {dollars} |"
        )
    note = f"prices: {price[0]} at ${price[1]}/h" if price else "no price for this device in prices.json"
    return "\n".join(lines) + "\n\n" + note


def labels(args: argparse.Namespace, plat: str, device: str, argv: list[str] | None) -> dict:
    """What every row of this run names before its own fields."""
    common = {
        "bench": "stance",
        "device": device,
        "task": "stance",
        "platform": plat,
        "command": bench_rows.command("python experiments/bench.py", argv),
        "date": bench_rows.now(),
        "versions": bench_rows.versions(),
        "unroll": args.unroll,
        "factor_asked": args.factor,
        "commit": bench_rows.commit(),
    }
    if plat != "gpu":
        common["cores"] = os.cpu_count()
    return common


def main(argv: list[str] | None = None) -> int:
    """Run the table for this machine and write its rows."""
    args = parse(argv)
    plat = bench_rows.resolve_platform(args.platform)
    from boxjax import platform

    platform.configure(plat, args.cache)
    gpu = plat == "gpu"
    bodies = (args.bodies or ("simple,muscular-fast,muscular" if gpu else "simple")).split(",")
    worlds_list = args.worlds or ([1024, 2048, 4096, 8192] if gpu else [16, 64])
    import jax

    device_counts = [len(jax.devices()) if d == "all" else int(d) for d in args.devices.split(",")]
    device = bench_rows.device_name()
    common = labels(args, plat, device, argv)
    factor = cli_common.warp_options(args)
    with bench_rows.Writer(bench_rows.rows_path(args.out, "stance", device, common["date"]), common) as out:
        for body, worlds, devices in itertools.product(bodies, worlds_list, device_counts):
            measured = measure(body, worlds, args.unroll, args.repeats, factor, devices)
            factor_ran = bench_rows.factor_ran(measured)
            out.figures(measured, factor=factor_ran, body=body, worlds=worlds, devices=devices)
            print(f"measured {body} at {worlds} worlds on {devices} device(s)", flush=True)
    print(markdown(out.rows, bench_rows.price_of(device, bench_rows.load_prices(), args.price)))
    print(f"rows written to {out.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli_common.run_main(main))
