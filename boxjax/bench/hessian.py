"""The constraint solver's Hessian factorisation alone: MuJoCo Warp's dense tiles (stock) against
`boxjax.physics.hessian_patch`'s, skipping the tiles that are zero between kinematic trees.

One launch factors and solves every world's Hessian (MuJoCo Warp's augmented blocked Cholesky with the
Newton decrement, as its solver calls it), on synthetic symmetric positive definite Hessians laid out as a
body's trees: "apart" (block diagonal by tree: no contact joins two trees, 95 % of world-steps in the
two-fighter block world with the shipped blocker acting) or "joined" (dense: the check costs, nothing is
skipped). Reports milliseconds per launch for both and whether their factors, solutions and sums are the
same bit for bit. On a GPU the launches are timed between CUDA synchronisations after a warm-up; on a CPU
Warp's CPU device runs them (slow; for tests).

    python -m boxjax.bench.hessian                      # the block world's layout (135 dofs: 89, 43, 3)
    python -m boxjax.bench.hessian --trees 32,20 --worlds 4 --reps 1
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib
import json
import os
import shlex
import sys
import time

import numpy as np

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

BLOCK_WORLD_TREES = (89, 43, 3)
"""The two-fighter block world's trees (dofs): our muscular fighter, the simple opponent, the bag."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--trees", default=",".join(map(str, BLOCK_WORLD_TREES)), help="dofs of each tree, in order"
    )
    p.add_argument("--worlds", type=int, default=2048)
    p.add_argument("--reps", type=int, default=20, help="timed launches per variant")
    p.add_argument("--out", default=None, help="folder for JSON Lines rows (none: print only)")
    args = p.parse_args(argv)
    args.trees = tuple(int(n) for n in args.trees.split(","))
    if min(args.trees) < 1 or args.worlds < 1 or args.reps < 1:
        p.error("--trees, --worlds and --reps must be positive")
    return args


def hessians(
    trees: tuple[int, ...], worlds: int, joined: bool, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(worlds, n, n) upper triangles of SPD Hessians padded as MuJoCo Warp pads them (identity on the
    padding) and (worlds, n, 1) gradients (zero on the padding): block diagonal by tree, or dense if
    `joined`."""
    from boxjax.physics import hessian_patch

    rng = np.random.default_rng(seed)
    nv = sum(trees)
    size = hessian_patch.padded_size(nv, hessian_patch.tile_size())
    blocks = [(0, nv)] if joined else list(zip(np.cumsum((0, *trees[:-1])), np.cumsum(trees), strict=True))
    h = np.zeros((worlds, size, size), np.float32)
    for lo, hi in blocks:
        x = rng.normal(size=(worlds, hi - lo, hi - lo))
        h[:, lo:hi, lo:hi] = x @ x.transpose(0, 2, 1) + (hi - lo) * np.eye(hi - lo)
    h[:, nv:, nv:] = np.eye(size - nv)
    grad = rng.normal(size=(worlds, size, 1)).astype(np.float32)
    grad[:, nv:] = 0.0
    return np.triu(h), grad


@functools.cache
def _kernel(func, size: int):
    """A kernel running `func` (a factor-and-solve function of `block_cholesky`'s signature) per world."""
    import warp as wp

    @wp.kernel(module="unique", enable_backward=False)
    def kernel(
        h: wp.array3d[float],
        grad: wp.array3d[float],
        factor: wp.array3d[float],
        search: wp.array3d[float],
        sums: wp.array2d[float],
    ):
        world = wp.tid()
        out = func(h[world], grad[world], size, factor[world], search[world])
        sums[world, 0] = out[0]
        sums[world, 1] = out[1]

    return kernel


def measure(trees: tuple[int, ...], worlds: int, joined: bool, reps: int) -> dict[str, object]:
    """{"stock_ms", "ours_ms", "identical"} for one layout: ms per launch of all worlds, and whether both
    wrote the same factor, search direction and sums."""
    import warp as wp

    from boxjax.physics import hessian_patch

    block_cholesky = importlib.import_module(hessian_patch._BLOCK_CHOLESKY)
    tile, threads = hessian_patch.tile_size(), hessian_patch.block_dim()
    nv = sum(trees)
    size = hessian_patch.padded_size(nv, tile)
    treeid = np.repeat(np.arange(len(trees)), trees)
    mask = hessian_patch.zero_if_apart(treeid, size, tile)
    funcs = {
        "stock": block_cholesky.create_blocked_cholesky_augmented_factorize_solve_newton_func(tile, size, nv),
        "ours": hessian_patch._factor_solve_newton_func(tile, size, nv, mask),
    }
    h, grad = hessians(trees, worlds, joined)
    out: dict[str, object] = {}
    results = {}
    for name, func in funcs.items():
        kernel = _kernel(func, size)
        arrays = [
            wp.array(h),
            wp.array(grad),
            wp.zeros(h.shape, dtype=float),
            wp.zeros((worlds, nv, 1), dtype=float),
        ]
        arrays.append(wp.zeros((worlds, 2), dtype=float))
        wp.launch_tiled(kernel, dim=worlds, inputs=arrays, block_dim=threads)  # compiles, warms up
        wp.synchronize()
        tick = time.perf_counter()
        for _ in range(reps):
            wp.launch_tiled(kernel, dim=worlds, inputs=arrays, block_dim=threads)
        wp.synchronize()
        out[f"{name}_ms"] = (time.perf_counter() - tick) / reps * 1e3
        results[name] = [a.numpy() for a in arrays[2:]]
    out["identical"] = all(
        np.array_equal(a, b) for a, b in zip(results["stock"], results["ours"], strict=True)
    )
    return out


def main(argv: list[str] | None = None) -> int:
    """Time both layouts, print them, write rows with --out."""
    args = parse(argv)
    from boxjax import platform

    platform.configure("gpu" if bench_rows.has_gpu() else "cpu")
    device = bench_rows.device_name()
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    rows = []
    for layout in ("apart", "joined"):
        got = measure(args.trees, args.worlds, layout == "joined", args.reps)
        print(
            f"{layout:6s} trees {args.trees}, {args.worlds} worlds on {device}: "
            f"stock {got['stock_ms']:.3f} ms, "
            f"ours {got['ours_ms']:.3f} ms ({got['stock_ms'] / got['ours_ms']:.2f}x); "
            f"identical: {got['identical']}"
        )
        common = {
            "bench": "hessian",
            "device": device,
            "task": "physics",
            "body": "trees " + ",".join(map(str, args.trees)),
            "worlds": args.worlds,
            "commit": bench_rows.commit(),
            "date": date,
            "variant": layout,
            "identical": bool(got["identical"]),
            **({} if bench_rows.has_gpu() else {"cores": os.cpu_count()}),
            "command": "python -m boxjax.bench.hessian "
            + shlex.join(argv if argv is not None else sys.argv[1:]),
        }
        rows += [
            {
                **common,
                "metric": "factor_ms",
                "value": got["ours_ms"],
                "unit": "ms",
                "factor": "nonzero-tiles",
            },
            {**common, "metric": "factor_ms", "value": got["stock_ms"], "unit": "ms", "factor": "all-tiles"},
            {**common, "metric": "factor_speedup", "value": got["stock_ms"] / got["ours_ms"], "unit": "x"},
        ]
    if args.out:
        path = bench_rows.rows_path(args.out, "hessian", device, date)
        with open(path, "a") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
        print(f"rows written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
