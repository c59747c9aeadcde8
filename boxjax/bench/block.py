"""Block task speed: the whole PPO iteration, and where its time goes (physics, vision, scoring, IK, update).

For each body and world count it first times `--unroll` control steps of all worlds (one jitted `lax.scan`,
zero actions, auto-reset on), after a warm-up and blocking on the result, in four variants:

* ``full``: the block env step as trained;
* ``physics``: only the physics substeps of every world (`boxjax.physics.mjx.step`);
* ``no_vision``: the env step with the vision frame replaced by zeros (XLA drops the ray work);
* ``no_scoring``: the env step with the punch score replaced by zero.

vision = full - no_vision, scoring = full - no_scoring, rest = full - physics - vision - scoring
(observations, rewards, the punch clock, opponent drive, resets).

Then the whole fused PPO iteration (`make_train_iteration`: collect `--unroll` steps of every world, GAE,
`--epochs` passes of minibatch `--minibatch`; the seed's shape by default), with its parts:

* ``it_collect_s``: the rollout alone (policy, env steps, the once-per-iteration reset of every world);
* ``it_update_s`` = iteration - collect (GAE, normaliser, the PPO update);
* ``it_physics_s``, ``it_vision_s``, ``it_scoring_s``: the per-step parts above times the unroll;
* ``it_ik_s``: the arm fit at reset (a reset of every world minus one with the fit replaced by the guard);
* ``it_teacher_s``: with `--teacher`, the walking teacher beside the policy (its observation and network
  on every world-step: `distill_targets` timed alone less the cost of the call, times the unroll; rows
  before 8fa8629 counted the call's cost too), as measured: negative where the call's cost and its noise
  exceed the work (rows before c3139b4 read 0.0 there); ``it_teacher_sd_s``, its spread (the
  two timings' standard deviations added in quadrature, times the unroll; no row with fewer than 2
  repeats). The iteration then trains with the distillation loss (`distill_coef` 0.1). `--teacher
  untrained` is a walk policy of the trained one's shape with fresh weights (its cost does not depend on
  the weights), for bodies without a shipped teacher.

On a GPU the defaults are MuJoCo Warp, the muscular body and the seed's shapes, 2,048 worlds x 16 steps
and 4,096 x 8; on a CPU-only machine a tiny version (MJX-JAX, simple body, 4 x 4 and 8 x 4). Rows go to
results/bench/block-<device>-<date>.jsonl; `experiments/plot_block.py` draws the iteration breakdown.

    python experiments/bench_block.py                          # this machine's defaults
    python experiments/bench_block.py --bodies simple,muscular --shapes 1024x16,2048x16,4096x8
    python experiments/bench_block.py --teacher untrained      # with the teacher's cost
    python experiments/bench_block.py --no-iteration           # env step table only
    python experiments/bench_block.py --iteration-only         # iteration (and teacher) only, no breakdown
    python -m boxjax.bench.block ...                           # the same, from the package
"""

from __future__ import annotations

import argparse
import os

from boxjax.bench import rows as bench_rows
from boxjax.bench import trace_report
from boxjax.bench.block_timing import (
    ITERATION_PARTS,
    Case,
    iteration_figures,
    iteration_rows,
    measure,
    progress,
    time_iteration,
    time_reset,
)
from boxjax.cli import common as cli_common
from boxjax.cli.common import field_values, run_main


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options (the physics' and the trace's need `--iteration-only`)."""
    p = bench_rows.parser(__doc__, "block")
    bench_rows.add_common_args(p, out=True, platform="auto", cache=True, price=True)
    add_case_arguments(p)
    add_physics_arguments(p)
    args = p.parse_args(argv)
    iteration_only_flags = {
        "--graph-mode": args.graph_mode,
        "--trace": args.trace,
        "--substep-calls one": args.substep_calls != "each",
        "--mj-option": args.mj_option,
        "--init": args.init,
    }
    for flag, given in iteration_only_flags.items():
        if given and not args.iteration_only:
            p.error(f"{flag} needs --iteration-only")
    try:
        args.mj_option = parse_mj_options(args.mj_option)
        args.env = task_options(args.env)
    except ValueError as error:
        p.error(str(error))
    return args


def add_case_arguments(p: argparse.ArgumentParser) -> None:
    """What is measured: bodies, shapes, opponents, the teacher and the acting policy, the PPO settings,
    which parts are timed."""
    p.add_argument("--bodies", default=None, help="comma list (default: muscular on GPU, simple on CPU)")
    p.add_argument(
        "--shapes",
        default=None,
        help="comma list of WORLDSxSTEPS (default: 2048x16,4096x8 on GPU, 4x4,8x4 on CPU)",
    )
    p.add_argument(
        "--opponents",
        default=None,
        help="comma list of simulated, puppet (default: both on GPU, simulated on CPU)",
    )
    p.add_argument("--teacher", default="", help="'' none, shipped, untrained, or a teacher file / walk dir")
    p.add_argument(
        "--init",
        default=None,
        help="a checkpoint or policy file of the block task whose policy acts in the timed iterations (e.g. "
        "the shipped blocker, as training from it acts; default: fresh weights); with --iteration-only",
    )
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions after warm-up")
    p.add_argument("--epochs", type=int, default=4, help="PPO epochs per iteration")
    p.add_argument("--minibatch", type=int, default=2048, help="PPO minibatch (capped at the batch)")
    p.add_argument("--no-iteration", action="store_true", help="time the env step only")
    p.add_argument(
        "--iteration-only",
        action="store_true",
        help="time the whole iteration (and the teacher) without the env-step variants, the breakdown and "
        "the rollout timed alone: a quarter of the compiles",
    )
    p.add_argument(
        "--trace",
        default=None,
        help="folder: profile two warm iterations per shape with jax.profiler and print trace_report.py's "
        "summary; with --iteration-only",
    )


def add_physics_arguments(p: argparse.ArgumentParser) -> None:
    """How the world is simulated: MuJoCo Warp's graph mode, calls per control step and flags
    (`cli.common.add_warp_arguments`), MuJoCo options and block task fields."""
    p.add_argument(
        "--graph-mode",
        default=None,
        help="MuJoCo Warp's CUDA graph mode, one of boxjax.physics.mjx.GRAPH_MODES (default: MJX's); "
        "with --iteration-only",
    )
    p.add_argument(
        "--substep-calls",
        choices=("each", "one"),
        default="each",
        help="MuJoCo Warp calls per control step: one per physics substep (MJX's own, default) or one for "
        "all of them; 'one' with --iteration-only",
    )
    cli_common.add_warp_arguments(p)
    p.add_argument(
        "--mj-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a field of the model's MuJoCo options (e.g. ccd_iterations=12); this changes the "
        "physics, to size a lever before a learning check; repeatable; with --iteration-only",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a block task config field for every variant (e.g. opponent_freeze_idle=true); repeatable",
    )


def task_options(pairs: list[str]) -> dict:
    """["opponent_freeze_idle=true"] -> {"opponent_freeze_idle": True}: block config fields, each parsed
    to its default's type (a ValueError naming an unknown field or a bad value)."""
    from boxjax.envs.block.config import BlockConfig

    return field_values(pairs, BlockConfig())


def parse_mj_options(items: list[str]) -> dict:
    """["ccd_iterations=12"] -> {"ccd_iterations": 12}, typed like the field of `mujoco.MjOption`; an unknown
    field, a bad value or the timestep (it sets the control substeps) is a ValueError naming it."""
    import mujoco

    defaults, options = mujoco.MjOption(), {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not hasattr(defaults, name) or name.startswith("_"):
            raise ValueError(
                f"--mj-option {item!r}: expected NAME=VALUE with NAME a field of mujoco.MjOption"
            )
        if name == "timestep":
            raise ValueError(
                "--mj-option timestep: the timestep sets the control substeps; not a bench lever"
            )
        kind = type(getattr(defaults, name))
        if kind not in (int, float):
            raise ValueError(f"--mj-option {name}: only numeric fields, not {kind.__name__}")
        try:
            options[name] = kind(text)
        except ValueError:
            raise ValueError(f"--mj-option {item!r}: {text!r} is not a {kind.__name__}") from None
    return options


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """ "2048x16,4096x8" -> [(2048, 16), (4096, 8)]."""
    shapes = []
    for item in text.split(","):
        worlds, sep, steps = item.partition("x")
        if not sep or not worlds.isdigit() or not steps.isdigit():
            raise SystemExit(f"bad --shapes entry {item!r}: expected WORLDSxSTEPS, e.g. 2048x16")
        shapes.append((int(worlds), int(steps)))
    return shapes


def dollars(m: dict[str, float], price: tuple[str, float] | None) -> str:
    """'$ per 1,000 iterations | $ per million steps' cells of one measured shape."""
    if price is None:
        return "n/a | n/a"
    per_it = m["s_per_iteration"] * 1000 / 3600 * price[1]
    return f"{per_it:.3f} | {1e6 / m['steps_per_s'] / 3600 * price[1]:.4f}"


def markdown(rows: list[dict], price: tuple[str, float] | None = None) -> str:
    """The printed tables: env step per body and world count (parts as ms and share of the step), then
    the iteration with its parts (s) and its cost at `price` (name, $/h)."""
    table: dict[tuple[str, str, int], dict[str, float]] = {}
    for r in rows:
        table.setdefault((r["body"], r.get("opponent", "puppet"), r["worlds"]), {})[r["metric"]] = r["value"]
    parts = ("physics", "vision", "scoring", "rest")
    head = "| body | opponent | worlds | env steps/s | step ms | "
    lines = [head + " | ".join(f"{p} ms (%)" for p in parts) + " |"]
    lines.append("|" + "---|" * (5 + len(parts)))
    for (body, opponent, worlds), m in sorted(table.items()):
        if "env_step_ms" not in m:
            continue
        step = m["env_step_ms"]
        cells = " | ".join(f"{m[p + '_ms']:.2f} ({100 * m[p + '_ms'] / step:.0f})" for p in parts)
        lines.append(
            f"| {body} | {opponent} | {worlds} | {m['env_steps_per_s']:,.0f} | {step:.2f} | {cells} |"
        )
    timed = [(key, m) for key, m in sorted(table.items()) if "s_per_iteration" in m]
    if timed:
        lines += [
            "",
            "| body | opponent | worlds | s/iteration (best) | median | steps/s | "
            + " | ".join(f"{p} s" for p in ITERATION_PARTS)
            + " | graphs/it | $/1k it | $/M steps |",
        ]
        lines.append("|" + "---|" * (9 + len(ITERATION_PARTS)))
        for (body, opponent, worlds), m in timed:
            cells = " | ".join(f"{m[f'it_{p}_s']:.3f}" if f"it_{p}_s" in m else "–" for p in ITERATION_PARTS)
            lines.append(
                f"| {body} | {opponent} | {worlds} | {m['s_per_iteration']:.3f} | "
                f"{m.get('s_per_iteration_median', float('nan')):.3f} | "
                f"{m['steps_per_s']:,.0f} | {cells} | "
                f"{m.get('it_graph_captures', float('nan')):.1f} | {dollars(m, price)} |"
            )
        lines.append("\n" + (f"prices: {price[0]} at ${price[1]}/h" if price else "no price for this device"))
    return "\n".join(lines)


def labels(args: argparse.Namespace, plat: str, device: str, argv: list[str] | None) -> dict:
    """What every row of this run names before its own fields."""
    from boxjax.mjcf import boxer

    return {
        "bench": "block",
        "device": device,
        "task": "block",
        "platform": plat,
        "command": bench_rows.command("python experiments/bench_block.py", argv),
        "date": bench_rows.now(),
        "versions": bench_rows.versions(),
        "teacher": args.teacher or "none",
        "policy": args.init or "fresh",
        "graph_mode": args.graph_mode or "default",
        "substep_calls": args.substep_calls,
        "solver_loop": args.solver_loop or "default",
        "block_dims": dict(cli_common.block_dims(args.block_dim)),
        "mj_options": args.mj_option,
        "task_options": args.env,
        "factor_asked": args.factor,
        "rule": "fast" if args.env or args.mj_option else "seed",
        "ccd_iterations": args.mj_option.get("ccd_iterations", boxer.CCD_ITERATIONS),
        "epochs": args.epochs,
        "minibatch": args.minibatch,
        "commit": bench_rows.commit(),
    }


def physics_options(args: argparse.Namespace, opponent: str) -> dict:
    """The physics and task options of `variant_env` for one opponent."""
    return {
        "graph_mode": args.graph_mode,
        "substeps_in_one_call": args.substep_calls == "one",
        "mj_options": args.mj_option,
        "opponent": opponent,
        **cli_common.warp_options(args),
        **args.env,
    }


def case_figures(args: argparse.Namespace, case: Case, physics: dict) -> list[tuple[str, float, str]]:
    """Every figure of one measured case: the reset and the iteration alone (`--iteration-only`, traced
    with `--trace`), else the env-step table and, unless `--no-iteration`, the iteration with its parts."""
    body, worlds, unroll = case.body, case.worlds, case.unroll
    if args.iteration_only:
        reset_s, first = time_reset("full", body, worlds, args.repeats, physics)
        progress(f"{body} {worlds}x{unroll}: reset {1e3 * reset_s:.1f} ms")
        trace_dir = args.trace and os.path.join(args.trace, f"{body}-{worlds}x{unroll}")
        it = time_iteration(case, first, physics, trace_dir, rollout_alone=False)
        if trace_dir:
            print(trace_report.report(trace_report.find_trace(trace_dir)), flush=True)
        return [("reset_ms", 1e3 * reset_s, "ms"), *iteration_figures(it, worlds, unroll)]
    figures, step_s, first = measure(body, worlds, unroll, args.repeats, physics)
    if not args.no_iteration:
        figures += iteration_rows(case, step_s, first, physics)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the table for this machine and write its rows."""
    args = parse(argv)
    plat = bench_rows.resolve_platform(args.platform)
    from boxjax import platform
    from boxjax.physics import mjx as physics_mjx

    platform.configure(plat, args.cache)
    gpu = plat == "gpu"
    bodies = (args.bodies or ("muscular" if gpu else "simple")).split(",")
    shapes = parse_shapes(args.shapes or ("2048x16,4096x8" if gpu else "4x4,8x4"))
    opponents = (args.opponents or ("simulated,puppet" if gpu else "simulated")).split(",")
    device = bench_rows.device_name()
    common = labels(args, plat, device, argv)
    how = {"epochs": args.epochs, "minibatch": args.minibatch, "repeats": args.repeats, "init": args.init}
    with bench_rows.Writer(bench_rows.rows_path(args.out, "block", device, common["date"]), common) as out:
        for body, opponent in ((b, o) for b in bodies for o in opponents):
            physics = physics_options(args, opponent)
            for worlds, unroll in shapes:
                case = Case(body, worlds, unroll, teacher=args.teacher, opponent=opponent, **how)
                figures = case_figures(args, case, physics)
                factor = bench_rows.factor_ran(figures)
                trees = physics_mjx.trees_taken(factor == "fused", physics["fused_factor_trees"])
                shape = {"body": body, "opponent": opponent, "worlds": worlds, "unroll": unroll}
                out.figures(figures, factor=factor, factor_trees=trees, **shape)
                print(f"measured {body} against the {opponent} opponent at {worlds} worlds", flush=True)
    print(markdown(out.rows, bench_rows.price_of(device, bench_rows.load_prices(), args.price)))
    print(f"rows written to {out.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
