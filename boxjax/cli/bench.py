"""`boxjax bench`: the benchmarks `make bench` runs, or one measurement tool of `boxjax.bench`.

    boxjax bench                      # the stance table; on a GPU the factorisation kernel, the block
                                      # task and self-play's cost, on a CPU-only machine the CPU path;
                                      # last the seed's table
    boxjax bench TOOL [ARGS ...]      # one tool, e.g. `boxjax bench block --shapes 2048x16 --repeats 5`

Rows go to results/bench/ (JSON Lines), one per measurement, naming device, body, task, worlds and commit.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

from boxjax.bench import rows

TOOLS = {
    "stance": "the stance task's speed table (steps/s, s/iteration, $ per 1,000 iterations)",
    "block": "the block task's iteration and where its time goes",
    "cpu": "the CPU path (mujoco.batch) against a bare mj_step",
    "factor": "the fused mass-matrix factorisation kernel against MuJoCo Warp's",
    "seed_table": "the seed's price-and-speed table of the blocking training, from every kept row",
    "solve_report": "time and dollars to solve the stance, from solve runs",
    "run_report": "a run's seconds per iteration and set-up",
    "learn_report": "what a run learnt, window by window",
    "trace_report": "where a profiled iteration's GPU time went",
    "solver_iterations": "the constraint solver's iterations per physics step, a policy acting",
    "profile_physics": "MuJoCo Warp's physics step per model variant (launch block sizes, solver options)",
    "plot_block": "the block iteration's breakdown as an image",
    "plot_runs": "training runs' learning curves overlaid in one image",
    "plot_alike": "the training-alike check: runs against a band of reference runs, by iteration",
    "brax": "Brax's PPO beside ours on MuJoCo Playground's tasks (the compare extra)",
    "profile_ppo": "the PPO update's phases, ours and Brax's",
    "report": "the tables of docs/benchmarks.md and README's headline figures, written from the rows",
    "selfplay": "the blocking iteration with two learners (self-play) against one, same device and worlds",
}
"""`boxjax bench TOOL`: modules of `boxjax.bench`, each with `main(argv)`, and what they measure."""


def default_tools(gpu: bool) -> tuple[str, ...]:
    """The tools `boxjax bench` runs in order on a machine with (`gpu`) or without a GPU."""
    middle = ("factor", "block", "selfplay") if gpu else ("cpu",)
    return ("stance", *middle, "seed_table")


def run_tool(name: str, argv: list[str]) -> int:
    """Run one tool's `main(argv)`; an unknown name is an error naming the tools."""
    tool = name.replace("-", "_")
    if tool not in TOOLS:
        raise ValueError(f"unknown bench tool {name!r}; valid: {', '.join(TOOLS)}")
    return importlib.import_module(f"boxjax.bench.{tool}").main(argv)


def main(argv: list[str] | None = None) -> int:
    """`boxjax bench [TOOL ARGS...]`: the tool, or every default tool in order, each in a process of its
    own (stopping at a failure)."""
    argv = list(argv or [])
    if argv and argv[0] in ("-h", "--help"):
        width = max(map(len, TOOLS))
        print(__doc__ + "\ntools:\n" + "\n".join(f"  {k:<{width}}  {v}" for k, v in TOOLS.items()))
        return 0
    if argv:
        return run_tool(argv[0], argv[1:])
    for tool in default_tools(rows.has_gpu()):  # each in its own process: each sets up JAX its own way
        status = subprocess.run([sys.executable, "-m", f"boxjax.bench.{tool}"]).returncode
        if status:
            return status
    return 0
