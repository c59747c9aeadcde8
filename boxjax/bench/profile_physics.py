"""Where MuJoCo Warp's step spends its time in a boxjax world: a per-function tree, per model variant.

Builds the block task's world (our fighter, the bag, the puppet opponent; `--task stance`: the stance
arena), puts `--worlds` copies on the Warp device at the "stance" keyframe (the guard) with the env's contact
and constraint slots, and drives them with random controls (uniform over each actuator's range times
`--ctrl-noise`, one of 8 draws per step) so the worlds spread out. One `mjw.step` is captured in a CUDA graph
and replayed `--steps` times after a warm-up: once without the tracer (physics steps per second), once with
MuJoCo Warp's event tracer on (mean ms per step of every traced function, nested; CUDA only). Each
`--variants` entry is a list of MuJoCo Warp model overrides separated by ";" (e.g.
"opt.iterations=2;opt.ls_iterations=4", or launch block sizes such as
"block_dim.update_gradient_cholesky_blocked=64"); "base" is none, and "stock" is none with MuJoCo Warp's own
factorisation instead of ours (`boxjax.physics.factor`, which the other variants install for every tree of
more than 6 dofs, as in training).
Prints a report per variant and, with `--out`, appends JSON Lines rows (one per variant; `trace_ms` is a
list of [depth, function, ms] in call order).

    boxjax bench profile_physics --body muscular --worlds 2048
    boxjax bench profile_physics --variants base stock "opt.iterations=2;opt.ls_iterations=4"
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import time

import numpy as np

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

WARMUP_STEPS = 50
"""Untimed replays of each captured graph before timing."""
BEST_MIN_GAIN = 0.02
"""The least share of "base"'s step time a block-size variant must save to be named best (`best_block_flags`);
below it a difference is not told apart from the replays' noise."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = bench_rows.parser(__doc__, "profile_physics")
    p.add_argument("--body", default="muscular", help="boxjax body")
    p.add_argument("--task", choices=("block", "stance"), default="block", help="whose world")
    p.add_argument("--worlds", type=int, default=2048, help="worlds stepped together")
    p.add_argument("--steps", type=int, default=200, help=f"replays timed per variant (after {WARMUP_STEPS})")
    p.add_argument("--ctrl-noise", type=float, default=0.3, help="control noise, fraction of each range")
    p.add_argument("--variants", nargs="+", default=["base"], help='"base" or "key=value;key=value"')
    p.add_argument("--device", default=None, help="Warp device (default: Warp's default)")
    p.add_argument("--out", default=None, help="JSON Lines file to append rows to")
    p.add_argument(
        "--best-out",
        default=None,
        help="file to write the fastest block-size variant's --block-dim flags to, after every variant "
        f"(empty if none beats base by {100 * BEST_MIN_GAIN:.0f} %%)",
    )
    bench_rows.add_common_args(p)
    return p.parse_args(argv)


def world_model(task: str, body: str):
    """(MjModel, its "stance" keyframe id, contacts per world, constraint rows per world) of the world."""
    import mujoco

    if task == "block":
        from boxjax.envs.block.config import BlockConfig
        from boxjax.envs.block.env import BlockEnv

        env = BlockEnv(BlockConfig(body=body, teacher=""))
    else:
        from boxjax.envs.stance.env import StanceConfig, StanceEnv

        env = StanceEnv(StanceConfig(body=body))
    key = mujoco.mj_name2id(env.mj_model, mujoco.mjtObj.mjOBJ_KEY, "stance")
    if key < 0:  # mj_resetDataKeyframe would quietly reset to qpos0
        raise ValueError(f"the {task} world of {body!r} has no 'stance' keyframe")
    return env.mj_model, key, env.backend.config.contacts_per_world, env.backend.config.njmax


def overrides(variant: str) -> list[str]:
    """The override strings of one variant ("base", "stock": none)."""
    return [] if variant in ("base", "stock") else [s.strip() for s in variant.split(";") if s.strip()]


def mj_overrides(variant: str) -> list[str]:
    """The overrides of one variant that MuJoCo's own model has (all but MuJoCo Warp's launch block sizes,
    "block_dim.KERNEL=THREADS")."""
    return [o for o in overrides(variant) if not o.startswith("block_dim.")]


def block_sizes_only(variant: str) -> bool:
    """Whether a variant sets launch block sizes and nothing else ("base" and "stock" set none; "stock" also
    swaps the factorisation)."""
    given = overrides(variant)
    return bool(given) and all(o.startswith("block_dim.") for o in given)


def best_block_flags(rows: list[dict]) -> str:
    """The `--block-dim KERNEL=THREADS` flags of the fastest variant made of block sizes alone that saves at
    least `BEST_MIN_GAIN` of the "base" row's step time; "" when none does (or no base row)."""
    base = [r["step_ms"] for r in rows if r["variant"] == "base"]
    sized = [r for r in rows if block_sizes_only(r["variant"])]
    if not base or not sized:
        return ""
    best = min(sized, key=lambda r: r["step_ms"])
    if best["step_ms"] > (1.0 - BEST_MIN_GAIN) * base[0]:
        return ""
    return " ".join(f"--block-dim {o.removeprefix('block_dim.')}" for o in overrides(best["variant"]))


def flatten(trace: dict, depth: int = 0) -> list[tuple[int, str, float]]:
    """(depth, name, total ms) rows of one `EventTracer.trace()` (ms per call), parents before children."""
    rows = []
    for name, (events_ms, sub) in trace.items():
        rows.append((depth, name, float(sum(events_ms))))
        rows.extend(flatten(sub, depth + 1))
    return rows


def mean_rows(per_step: list[list[tuple[int, str, float]]]) -> list[tuple[int, str, float]]:
    """Per-function mean over steps (rows matched by position; the trace's shape is the same each step)."""
    first = per_step[0]
    if not first:
        return []
    return [(d, n, float(np.mean([rows[i][2] for rows in per_step]))) for i, (d, n, _) in enumerate(first)]


def device_worlds(args: argparse.Namespace, variant: str):
    """(model, data, (nworld, nu) control draws) on the current Warp device for one variant."""
    import mujoco
    import warp as wp
    from mujoco.mjx.third_party import mujoco_warp as mjw
    from mujoco.mjx.third_party.mujoco_warp._src import io as mjw_io

    from boxjax.physics import factor_patch

    mjm, key, ncon, njmax = world_model(args.task, args.body)
    mjw_io.override_model(mjm, mj_overrides(variant))
    ours = variant != "stock" and factor_patch.needs_fused_factor(mjm)
    factor_patch.install(ours)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_resetDataKeyframe(mjm, mjd, key)
    mujoco.mj_forward(mjm, mjd)
    with factor_patch.all_trees_on_sparse_path(ours):  # every tree in our launch, as in training
        m = mjw.put_model(mjm)
        mjw_io.override_model(m, overrides(variant))
        m.opt.warn_overflow = 0  # solver-cap warnings would flood the report
        d = mjw.put_data(mjm, mjd, nworld=args.worlds, naconmax=args.worlds * ncon, njmax=njmax)
    lo, hi = mjm.actuator_ctrlrange[:, 0], mjm.actuator_ctrlrange[:, 1]
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * args.ctrl_noise
    rng = np.random.default_rng(0)
    draws = [rng.uniform(-1, 1, (args.worlds, mjm.nu)) for _ in range(8)]
    return m, d, [wp.array((mid + half * u).astype(np.float32)) for u in draws]


def replay(graph, d, controls: list, steps: int, tracer=None) -> tuple[float, list]:
    """(mean wall seconds per replay of `graph`, per-replay flattened traces when `tracer` is given)."""
    import warp as wp

    traces, total_s = [], 0.0
    for i in range(steps):
        wp.copy(d.ctrl, controls[i % len(controls)])
        wp.synchronize()
        start = time.perf_counter()
        wp.capture_launch(graph)
        wp.synchronize()
        total_s += time.perf_counter() - start
        if tracer is not None:
            traces.append(flatten(tracer.trace()))
    return total_s / steps, traces


def profile(args: argparse.Namespace, variant: str) -> dict:
    """Time and trace one variant; returns its row."""
    import warp as wp
    from mujoco.mjx.third_party import mujoco_warp as mjw
    from mujoco.mjx.third_party.mujoco_warp._src import warp_util

    device = wp.get_device(args.device)
    with wp.ScopedDevice(device):
        m, d, controls = device_worlds(args, variant)
        with wp.ScopedCapture() as plain:
            mjw.step(m, d)
        replay(plain.graph, d, controls, WARMUP_STEPS)
        step_s, _ = replay(plain.graph, d, controls, args.steps)
        traces = [[]]
        if device.is_cuda:  # the tracer records CUDA events
            with warp_util.EventTracer() as tracer:
                with wp.ScopedCapture() as traced:
                    mjw.step(m, d)
                replay(traced.graph, d, controls, WARMUP_STEPS)
                _, traces = replay(traced.graph, d, controls, args.steps, tracer)
        contacts = int(d.nacon.numpy()[0])
        rows_max = int(d.nefc.numpy().max())
    return {
        "variant": variant,
        "step_ms": 1e3 * step_s,
        "physics_steps_per_s": args.worlds / step_s,
        "contacts_per_world_now": contacts / args.worlds,
        "constraint_rows_max_now": rows_max,
        "trace_ms": [[depth, name, round(ms, 4)] for depth, name, ms in mean_rows(traces)],
    }


def report(row: dict) -> str:
    """The printed table of one variant."""
    lines = [
        f"== {row['variant']}: {row['step_ms']:.3f} ms per step of all worlds, "
        f"{row['physics_steps_per_s']:,.0f} physics steps/s; "
        f"contacts/world {row['contacts_per_world_now']:.1f}, "
        f"max constraint rows {row['constraint_rows_max_now']}"
    ]
    lines += [f"{'  ' * depth}{name:<{40 - 2 * depth}} {ms:8.3f} ms" for depth, name, ms in row["trace_ms"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Profile every variant and print (and optionally write) the rows."""
    args = parse(argv)
    import importlib.metadata

    import warp as wp

    wp.config.quiet = True
    wp.init()
    device = wp.get_device(args.device)
    versions = {name: importlib.metadata.version(name) for name in ("mujoco", "warp-lang")}
    rows = []
    for variant in args.variants:
        row = profile(args, variant)
        rows.append(row)
        row.update(
            versions=versions,
            device=device.name,
            body=args.body,
            task=args.task,
            worlds=args.worlds,
            date=datetime.date.today().isoformat(),
            commit=bench_rows.commit(),
            command="boxjax bench profile_physics " + shlex.join(sys.argv[1:] if argv is None else argv),
        )
        print(report(row), flush=True)
        if args.out:
            bench_rows.write_rows(args.out, [row])
        if args.best_out:  # after every variant: a sweep cut short still names its best so far
            flags = best_block_flags(rows)
            with open(args.best_out, "w") as f:
                f.write(flags)
    if args.best_out:
        print(f"best block sizes: {flags or f'none saves {BEST_MIN_GAIN:.0%} of base'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
