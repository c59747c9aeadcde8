"""What self-play costs: the blocking iteration with one learner (our blocker against the scripted
opponent) and with two (`--env opponent_policy=learned`: both fighters learn in the same compiled iteration,
`boxjax.rl.agents`), on the same device, body and worlds, one after the other in one process.

    boxjax bench selfplay                          # GPU: muscular 2,048 x 16 against the simulated opponent
    boxjax bench selfplay --body simple --shape 4x4 --repeats 2     # a CPU check of the tool

Each iteration is timed as `boxjax bench block --iteration-only` times it (warm-up until no CUDA graph is
captured, then `--repeats` timed iterations; the median counts). Rows: the two medians and their ratio
(`two_learner_ratio`; the target is at most 1.15), under results/bench/selfplay-DEVICE-DATE.jsonl.
"""

from __future__ import annotations

import argparse

from boxjax.bench import block_timing
from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

POLICIES = ("scripted", "learned")
"""The opponent of the one-learner and of the two-learner iteration (`BlockConfig.opponent_policy`)."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = bench_rows.parser(__doc__, "selfplay")
    bench_rows.add_common_args(p, out=True, platform="auto", cache=True)
    p.add_argument("--body", default=None, help="muscular on a GPU, simple on a CPU by default")
    p.add_argument("--shape", default=None, help="WORLDSxSTEPS (default 2048x16 on a GPU, 4x4 on a CPU)")
    p.add_argument("--repeats", type=int, default=5, help="timed iterations after warm-up")
    p.add_argument("--teacher", default="", help="'' none, shipped, or a teacher file (as bench block's)")
    p.add_argument("--init", default=None, help="a block policy file or checkpoint whose blocker acts")
    return p.parse_args(argv)


def median_iteration_s(case: block_timing.Case, opponent_policy: str) -> float:
    """The median seconds of the timed iterations of `case` with the opponent `opponent_policy`."""
    physics = {"opponent": case.opponent, "opponent_policy": opponent_policy}
    _, first = block_timing.time_reset("full", case.body, case.worlds, case.repeats, physics)
    return block_timing.time_iteration(case, first, physics, rollout_alone=False)["iteration_median"]


def main(argv: list[str] | None = None) -> int:
    """Time both iterations, print the ratio, write the rows."""
    args = parse(argv)
    plat = bench_rows.resolve_platform(args.platform)
    from boxjax import platform

    platform.configure(plat, args.cache)
    gpu = plat == "gpu"
    worlds, unroll = (int(x) for x in (args.shape or ("2048x16" if gpu else "4x4")).split("x"))
    body = args.body or ("muscular" if gpu else "simple")
    case = block_timing.Case(
        body, worlds, unroll, epochs=4, minibatch=min(2048, worlds * unroll), repeats=args.repeats,
        teacher=args.teacher, init=args.init,
    )  # fmt: skip
    one, two = (median_iteration_s(case, policy) for policy in POLICIES)
    device = bench_rows.device_name()
    common = {
        "bench": "selfplay", "device": device, "platform": plat, "task": "block", "body": body,
        "worlds": worlds, "unroll": unroll, "opponent": case.opponent, "teacher": args.teacher or "none",
        "policy": args.init or "fresh", "repeats": args.repeats, "date": bench_rows.now(),
        "command": bench_rows.command("boxjax bench selfplay", argv), "commit": bench_rows.commit(),
        "versions": bench_rows.versions(),
    }  # fmt: skip
    figures = [
        ("s_per_iteration_one_learner", one, "s"),
        ("s_per_iteration_two_learners", two, "s"),
        ("two_learner_ratio", two / one, "x"),
    ]
    with bench_rows.Writer(bench_rows.rows_path(args.out, "selfplay", device, common["date"]), common) as out:
        out.figures(figures)
    times = f"one learner {one:.3f} s, two {two:.3f} s, ratio {two / one:.3f}"
    print(f"{body} {worlds}x{unroll} on {device}: {times}")
    print(f"rows written to {out.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
