"""`make bench`: physics, env step, update and whole-iteration speed, per body, task and world count.

On a GPU it measures at 1,024 / 2,048 / 4,096 / 8,192 worlds with MuJoCo Warp; on a CPU-only machine a
small version of the same table (MJX's JAX implementation, the simple body, few worlds). Every figure is
taken after a warm-up, blocking on the result before the clock stops. Rows go to
results/bench/<bench>-<device>-<date>.jsonl; a markdown table with dollars per 1,000 iterations and per
million steps (prices from boxjax/bench/prices.json) is printed. (`python -m boxjax.bench.stance`)
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import shlex
import sys
import time

from boxjax.bench import rows as bench_rows
from boxjax.cli import common as cli_common


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--platform", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--bodies", default=None, help="comma list (default: all on GPU, simple on CPU)")
    p.add_argument("--worlds", default=None, help="comma list of world counts")
    p.add_argument("--unroll", type=int, default=16, help="control steps per iteration")
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions after warm-up")
    p.add_argument("--out", default=os.path.join("results", "bench"))
    p.add_argument("--price", default=None, help="price key of this device in prices.json")
    p.add_argument("--cache", default=None)
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
    import jax.numpy as jnp

    from boxjax import envs
    from boxjax.envs.wrappers import autoreset_step
    from boxjax.physics import graphs
    from boxjax.physics import mjx as physics
    from boxjax.rl import ppo
    from boxjax.rl.rollout import init_rollout
    from boxjax.rl.train_step import init_train_state, make_train_iteration

    rows = []
    tick = time.perf_counter()
    env = envs.make("stance", body=body, num_worlds=worlds, **factor)
    params = env.default_params()
    minibatch = min(2048, worlds * unroll)
    config = ppo.PPOConfig(num_envs=worlds, unroll_length=unroll, minibatch_size=minibatch)
    key = jax.random.PRNGKey(0)
    rs = init_rollout(env, params, key, worlds)
    jax.block_until_ready(rs)
    rows.append(("model_build_s", time.perf_counter() - tick, "s"))

    @jax.jit
    def physics_only(data, model):
        def body_fn(d, _):
            return jax.vmap(lambda x: physics.step(model, x, env.substeps))(d), None

        return jax.lax.scan(body_fn, data, None, length=unroll)[0]

    _, best, _ = bench_rows.timed(physics_only, rs.env.data, params.model, repeats=repeats)
    rows.append(("physics_steps_per_s", worlds * unroll * env.substeps / best, "1/s"))

    first_state = rs.env
    zero_action = jnp.zeros((worlds, env.action_size), jnp.float32)

    @jax.jit
    def env_only(state, p):
        def body_fn(s, _):
            return autoreset_step(env, p, s, first_state, zero_action)[0], None

        return jax.lax.scan(body_fn, state, None, length=unroll)[0]

    _, best_env, _ = bench_rows.timed(env_only, rs.env, params, repeats=repeats)
    rows.append(("env_step_ms", 1e3 * best_env / unroll, "ms"))
    rows.append(("env_step_vs_physics", (best_env / (worlds * unroll * env.substeps)) * rows[1][1], "x"))

    ts = init_train_state(env, config, key)
    iteration = make_train_iteration(env, config)
    ts, rs = ppo.own_buffers((ts, rs))
    tick = time.perf_counter()
    ts, rs, metrics = iteration(ts, rs, params)
    jax.block_until_ready(metrics)
    rows.append(("compile_s", time.perf_counter() - tick, "s"))
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
    overflow = max((float(v) for k, v in metrics.items() if k.startswith("env/overflow/")), default=0.0)
    rows.append(("overflow_worlds", overflow, "worlds"))
    return rows


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
    overflow = max((float(v) for k, v in metrics.items() if k.startswith("env/overflow/")), default=0.0)
    rows.append(("overflow_worlds", overflow, "worlds"))
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


def main(argv: list[str] | None = None) -> int:
    """Run the table for this machine and write its rows."""
    args = parse(argv)
    plat = args.platform if args.platform != "auto" else ("gpu" if bench_rows.has_gpu() else "cpu")
    from boxjax import platform

    platform.configure(plat, args.cache)
    gpu = plat == "gpu"
    bodies = (args.bodies or ("simple,muscular-fast,muscular" if gpu else "simple")).split(",")
    worlds_list = [int(w) for w in (args.worlds or ("1024,2048,4096,8192" if gpu else "16,64")).split(",")]
    import jax

    device_counts = [len(jax.devices()) if d == "all" else int(d) for d in args.devices.split(",")]
    device = bench_rows.device_name()
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    command = "python experiments/bench.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    common = {
        "bench": "stance",
        "device": device,
        "task": "stance",
        "platform": plat,
        "command": command,
        "date": date,
        "versions": bench_rows.versions(),
        "unroll": args.unroll,
        "factor_asked": args.factor,
        "commit": bench_rows.commit(),
    }
    if not gpu:
        common["cores"] = os.cpu_count()
    path = bench_rows.rows_path(args.out, "stance", device, date)
    rows = []
    with open(path, "a") as f:
        factor = cli_common.warp_options(args)
        for body, worlds, devices in itertools.product(bodies, worlds_list, device_counts):
            measured = measure(body, worlds, args.unroll, args.repeats, factor, devices)
            for metric, value, unit in measured:
                row = {
                    **common,
                    "factor": bench_rows.factor_ran(measured),
                    "body": body,
                    "worlds": worlds,
                    "devices": devices,
                    "metric": metric,
                    "value": value,
                    "unit": unit,
                }
                rows.append(row)
                f.write(json.dumps(row) + "\n")
                f.flush()
            print(f"measured {body} at {worlds} worlds on {devices} device(s)", flush=True)
    print(markdown(rows, bench_rows.price_of(device, bench_rows.load_prices(), args.price)))
    print(f"rows written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli_common.run_main(main))
