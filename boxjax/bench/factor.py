"""Mass-matrix factor+solve: MuJoCo Warp's level-by-level sparse LDLᵀ (stock) vs our one launch (fused).

Two figures per body and world count, on a GPU:
  factor_ms            one factor+solve of all worlds (stock `smooth.factor_solve_i`, ~28 launches, vs our
                       kernel), each captured in a CUDA graph and replayed many times between CUDA events;
  physics_steps_per_s  vmapped `mjx.step` (impl="warp") in a `lax.scan`, with and without
                       `factor_patch.install()`, each variant in its own subprocess (nothing shared).
Compile time is kept out of the steady state; the Warp kernel cache is shared by all subprocesses
(`WARP_CACHE_PATH`, see `boxjax.platform`). Rows go to results/bench/factor-<device>-<date>.jsonl.

  python experiments/bench_factor.py                      # muscular, muscular-fast at 2,048 and 8,192 worlds
  python experiments/bench_factor.py --model synthetic    # the synthetic 89-DoF tree instead
  python -m boxjax.bench.factor                           # the same, from the package
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

WORKER = "import sys; from boxjax.bench import factor; sys.exit(factor.main(sys.argv[1:]))"
"""The physics worker's program (`python -c`): `main` as the script ran it, a traceback on failure."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = bench_rows.parser(__doc__, "factor")
    bench_rows.add_common_args(p, out=True, cache=True)
    p.add_argument("--model", choices=("mjcf", "synthetic"), default="mjcf", help="boxjax bodies or the tree")
    p.add_argument("--bodies", default="muscular,muscular-fast", help="comma list (with --model mjcf)")
    bench_rows.add_worlds(p, "2048,8192")
    p.add_argument("--reps", type=int, default=200, help="timed factor+solve replays")
    p.add_argument("--steps", type=int, default=200, help="physics steps per timed scan")
    p.add_argument("--repeats", type=int, default=3, help="timed scans after warm-up (best is kept)")
    p.add_argument("--worker", nargs=2, metavar=("BODY", "VARIANT"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def build(body: str):
    """The MjModel of `body` ("synthetic" or a boxjax body) and its per-world contact budget."""
    if body == "synthetic":
        from boxjax.physics import synthetic

        return synthetic.tree_model(floor=True), (64, 256)
    from boxjax import mjcf

    budget = mjcf.CONTACT_BUDGET[body]
    return mjcf.build(body)[0], (2 * budget.ncon_per_world, 2 * budget.njmax)


def _samples(mj_model, worlds: int, distinct: int = 32):
    """(M (worlds, nC), y (worlds, nv)) float32: `distinct` random configurations tiled over the worlds."""
    import mujoco

    from boxjax.physics import synthetic

    key = np.random.default_rng(0)
    data = mujoco.MjData(mj_model)
    Ms = []
    for _ in range(distinct):
        data.qpos[:] = synthetic.random_qpos(mj_model, key)
        mujoco.mj_forward(mj_model, data)
        Ms.append(data.M.copy())
    M = np.resize(np.array(Ms, np.float32), (worlds, mj_model.nC))
    return M, key.normal(size=(worlds, mj_model.nv)).astype(np.float32)


def _graph_ms(fn, reps: int) -> float:
    """Milliseconds per replay of `fn` captured in a CUDA graph, timed with CUDA events after a warm-up."""
    import warp as wp

    fn()  # loads modules outside the capture
    with wp.ScopedCapture() as capture:
        fn()
    for _ in range(10):
        wp.capture_launch(capture.graph)
    start, end = wp.Event(enable_timing=True), wp.Event(enable_timing=True)
    wp.record_event(start)
    for _ in range(reps):
        wp.capture_launch(capture.graph)
    wp.record_event(end)
    wp.synchronize_event(end)
    return wp.get_event_elapsed_time(start, end) / reps


def factor_times(mj_model, worlds: int, reps: int) -> tuple[float, float, float]:
    """(stock ms, fused ms, max relative difference of x) for one factor+solve of `worlds` worlds."""
    import warp as wp
    from mujoco.mjx.third_party import mujoco_warp as mjw

    from boxjax.physics import factor, factor_patch

    schedule = factor.level_schedule(mj_model)
    M_np, y_np = _samples(mj_model, worlds)
    with wp.ScopedDevice("cuda:0"):
        m = mjw.put_model(mj_model)
        d = mjw.make_data(mj_model, nworld=worlds)
        M, y = wp.array(M_np, dtype=float), wp.array(y_np, dtype=float)
        outs = {v: (wp.zeros_like(d.qLD), wp.zeros_like(d.qLDiagInv), wp.zeros_like(y)) for v in ("s", "f")}
        tables = factor.device_tables(schedule, "cuda:0")
        stock = factor_patch.stock_factor_solve_i()
        stock_ms = _graph_ms(lambda: stock(m, d, M, *outs["s"], y), reps)
        fused_ms = _graph_ms(lambda: factor.launch(schedule, tables, M, y, *outs["f"]), reps)
        xs, xf = outs["s"][2].numpy(), outs["f"][2].numpy()
    return stock_ms, fused_ms, float(np.abs(xs - xf).max() / np.abs(xs).max())


def physics_worker(body: str, variant: str, worlds_list: list[int], steps: int, repeats: int) -> None:
    """Prints one JSON line per world count: steps/s of vmapped mjx.step in a lax.scan (in a subprocess)."""
    from boxjax import platform

    platform.configure("gpu")
    import jax
    import jax.numpy as jnp
    import mujoco
    from mujoco import mjx
    from mujoco.mjx.third_party.mujoco_warp._src.types import OverflowType

    from boxjax.physics import factor_patch

    if variant == "fused":
        factor_patch.install()
    mj_model, (ncon, njmax) = build(body)
    mx = mjx.put_model(mj_model, impl="warp")
    quiet = int(OverflowType.ALL & ~(OverflowType.ITERATIONS | OverflowType.LS_ITERATIONS))
    mx = mx.tree_replace({"opt._impl.warn_overflow": quiet})
    data = mujoco.MjData(mj_model)
    if mj_model.nkey:
        mujoco.mj_resetDataKeyframe(mj_model, data, mj_model.nkey - 1)
    for worlds in worlds_list:
        d0 = mjx.make_data(mj_model, impl="warp", naconmax=worlds * ncon, njmax=njmax)
        d0 = d0.replace(qpos=jnp.asarray(data.qpos, jnp.float32), ctrl=jnp.asarray(data.ctrl, jnp.float32))
        batch = jax.vmap(lambda _, d=d0: d)(jnp.arange(worlds))
        run = jax.jit(functools.partial(_scan_steps, mx, steps))
        tick = time.perf_counter()
        batch = jax.block_until_ready(run(batch))
        compile_s = time.perf_counter() - tick
        best = float("inf")
        for _ in range(repeats):
            tick = time.perf_counter()
            batch = jax.block_until_ready(run(batch))
            best = min(best, time.perf_counter() - tick)
        row = {"worlds": worlds, "steps_per_s": worlds * steps / best, "compile_s": compile_s}
        print("ROW " + json.dumps(row), flush=True)


def _scan_steps(mx, steps: int, batch):
    """`steps` vmapped physics steps of a batch of worlds."""
    import jax
    from mujoco import mjx

    step = jax.vmap(lambda d: mjx.step(mx, d))
    return jax.lax.scan(lambda d, _: (step(d), None), batch, None, length=steps)[0]


def physics(body: str, variant: str, args) -> list[dict]:
    """Runs `physics_worker` in a fresh process and returns its rows."""
    worlds = ",".join(map(str, args.worlds))
    cmd = [sys.executable, "-c", WORKER, "--worker", body, variant, "--worlds", worlds]
    cmd += ["--steps", str(args.steps), "--repeats", str(args.repeats)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), timeout=600)
    if done.returncode:
        raise RuntimeError(
            f"physics worker {body}/{variant} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
        )
    return [json.loads(line[4:]) for line in done.stdout.splitlines() if line.startswith("ROW ")]


def versions() -> dict[str, str]:
    """Versions of the libraries that set the speed."""
    return {p: importlib.metadata.version(p) for p in ("jax", "mujoco", "mujoco-mjx", "warp-lang")}


def main(argv: list[str] | None = None) -> int:
    """Measure both figures for every body and world count and write the rows."""
    args = parse(argv)
    if args.worker:
        physics_worker(*args.worker, args.worlds, args.steps, args.repeats)
        return 0
    from boxjax import platform

    if args.cache:
        os.environ["BOXJAX_CACHE"] = args.cache
    platform.configure("gpu", args.cache)  # exports WARP_CACHE_PATH to the workers
    import warp as wp

    device = wp.get_device("cuda:0").name
    date = bench_rows.now()
    common = {
        "bench": "factor",
        "device": device,
        "task": "physics",
        "command": bench_rows.command("python experiments/bench_factor.py", argv),
        "date": date,
        "versions": versions(),
    }
    bodies = ["synthetic"] if args.model == "synthetic" else args.bodies.split(",")
    with bench_rows.Writer(bench_rows.rows_path(args.out, "factor", device, date), common) as out:
        for body in bodies:
            for row in body_rows(body, args):
                out.write(row)
                print(
                    f"{body:14s} {row['worlds']:6d} {row['variant']:6s} {row['metric']:20s} "
                    f"{row['value']:12.4g} {row['unit']}",
                    flush=True,
                )
    print(f"rows written to {out.path}")
    return 0


def body_rows(body: str, args: argparse.Namespace) -> Iterator[dict]:
    """Both figures of one body at every world count, each row's own fields as soon as measured."""

    def row(worlds: int, metric: str, value: float, unit: str, variant: str) -> dict:
        return {
            "body": body,
            "worlds": worlds,
            "metric": metric,
            "value": value,
            "unit": unit,
            "variant": variant,
        }

    mj_model, _ = build(body)
    for worlds in args.worlds:
        stock_ms, fused_ms, diff = factor_times(mj_model, worlds, args.reps)
        print(f"{body} {worlds}: max |x_fused - x_stock| / max |x_stock| = {diff:.2e}")
        yield row(worlds, "factor_ms", stock_ms, "ms", "stock")
        yield row(worlds, "factor_ms", fused_ms, "ms", "fused")
        yield row(worlds, "factor_speedup", stock_ms / fused_ms, "x", "fused")
    for variant in ("stock", "fused"):
        for measured in physics(body, variant, args):
            yield row(measured["worlds"], "physics_steps_per_s", measured["steps_per_s"], "steps/s", variant)
            print(f"  (first call incl. compile {measured['compile_s']:.1f} s)")


if __name__ == "__main__":
    raise SystemExit(run_main(main))
