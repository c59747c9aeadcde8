"""CPU path benchmark: `python experiments/bench_cpu.py [--task stance|block] [--body simple] [--cores 1,2]`.

1. Env step against bare MuJoCo, one thread: the task's step of K worlds (`boxjax.envs.cpu.CpuEnv.step`:
   the task's JAX code, physics through `mujoco.batch`, resets) per world, against MuJoCo's own
   `mj_step` time of the same states (`env_step_vs_mj_step`, target <= 1.3), and against a Python loop of
   `mujoco.mj_step(nstep=substeps)` replaying the same controls (and the puppet's mocap poses)
   (`env_step_vs_mj_step_loop`).
2. Training at 1, 2, 4, 8, 16 cores (those this machine has): `boxjax train --task <task> --platform cpu`
   run in a fresh process pinned to the first c cores, 32 worlds per core, 16 steps, the default
   network (block: no teacher); steady-state steps/s, s/iteration and the profile (medians after the
   first 3 iterations).
   Below 4 cores both the serial and the decoupled layout are measured; the learner's bf16 arithmetic
   is measured against fp32 at the largest core count.
3. Two projections to 96 vCPUs, their assumptions written into the rows: a model from the 1-core costs,
   and the largest measured run scaled linearly.

Rows go to results/bench/cpu-<device>-<date>.jsonl (bench, device, body, task, worlds, cores, metric,
value, unit, command, date, versions; plus load_avg, since a shared machine skews every figure).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

WORLDS_PER_CORE = 32
UNROLL = 16
STEADY_FROM = 3
"""Iterations before this one (compiles, first collections) are left out of the medians."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = bench_rows.parser(__doc__, "cpu")
    bench_rows.add_common_args(p, out=True)
    p.add_argument("--task", choices=("stance", "block"), default="stance")
    p.add_argument("--body", default="simple")
    p.add_argument("--cores", default="1,2,4,8,16", help="comma list; those above this machine's are skipped")
    p.add_argument("--env-worlds", type=int, default=64, help="worlds of the env-step measurement")
    p.add_argument(
        "--env-steps", type=int, default=50, help="control steps per round of the env-step measurement"
    )
    p.add_argument("--iterations", type=int, default=12, help="training iterations per core count")
    p.add_argument("--env-only", action="store_true", help="measure the env step only (item 1), no training")
    return p.parse_args(argv)


def device_name() -> str:
    """CPU model and logical CPU count, e.g. "AMD EPYC x2"."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return f"{model or os.uname().machine} x{len(os.sched_getaffinity(0))}"


def versions() -> dict[str, str]:
    """Versions of the libraries that set the speed."""
    import jax
    import mujoco
    import numpy

    return {"jax": jax.__version__, "mujoco": mujoco.__version__, "numpy": numpy.__version__}


def cpu_env(task: str, body: str, worlds: int):
    """The task's CPU environment on one thread, with episodes long enough that the timing sees few
    resets (stance: no shoves)."""
    from boxjax.envs.block.env import BlockConfig
    from boxjax.envs.cpu import CpuEnv
    from boxjax.envs.stance.env import StanceConfig

    if task == "block":
        config = BlockConfig(body=body, episode_s=1e3)
    else:
        config = StanceConfig(body=body, shove_speed_mps=(0.0, 0.0), episode_s=1e3)
    return CpuEnv(config, num_worlds=worlds, num_threads=1, seed=0)


def env_step_rows(
    task: str, body: str, worlds: int, steps: int, rounds: int = 4
) -> list[tuple[str, float, str]]:
    """Per-world cost of one control step on one thread: the whole env step against MuJoCo's part of it.

    `mj_step_us` is the time the env spends in `Batch.step` (MuJoCo's `mj_step` on every world, with the
    batch's < 0.2 us per world of state handling), timed inside the same calls, so both figures cover the
    very same states. `mj_step_loop_us` replays the env's controls from its starting states with a
    Python loop of `mujoco.mj_step` over one `MjData` per world (worlds the env reset, `resets`, then
    differ). The fastest of `rounds` rounds counts: a shared machine adds noise, never speed.
    """
    import mujoco
    import numpy as np

    env = cpu_env(task, body, worlds)
    env.reset()
    env.step(np.zeros((worlds, env.action_size), np.float32))  # compiles the task's halves
    rng = np.random.default_rng(0)
    datas = [mujoco.MjData(env.mj_model) for _ in range(worlds)]
    best = {"env": np.inf, "mj": np.inf, "loop": np.inf}
    resets = 0.0
    with physics_clock() as physics_s:
        for _ in range(rounds):
            actions = rng.uniform(-0.1, 0.1, (steps, worlds, env.action_size)).astype(np.float32)
            start = env.worlds.qpos.copy(), env.worlds.qvel.copy()
            physics_s[0] = 0.0
            env_s, done, ctrls, mocap = env_round(env, actions)
            resets += done
            best["env"] = min(best["env"], env_s)
            best["mj"] = min(best["mj"], physics_s[0])
            best["loop"] = min(best["loop"], mj_step_loop(env, datas, start, ctrls, mocap))
    per = 1e6 / (steps * worlds)
    return [
        ("env_step_us", best["env"] * per, "us/world-step"),
        ("mj_step_us", best["mj"] * per, "us/world-step"),
        ("env_step_vs_mj_step", best["env"] / best["mj"], "x"),
        ("mj_step_loop_us", best["loop"] * per, "us/world-step"),
        ("env_step_vs_mj_step_loop", best["env"] / best["loop"], "x"),
        ("substeps", float(env.substeps), "mj_step per control step"),
        ("resets", float(resets), "worlds"),
    ]


@contextlib.contextmanager
def physics_clock():
    """Within: `boxjax.physics.cpu.step` adds the seconds it takes to the yielded list's one entry."""
    from boxjax.physics import cpu

    physics_s = [0.0]
    bare_step = cpu.step

    def timed_step(*args):
        tick = time.perf_counter()
        failed = bare_step(*args)
        physics_s[0] += time.perf_counter() - tick
        return failed

    cpu.step = timed_step
    try:
        yield physics_s
    finally:
        cpu.step = bare_step


def env_round(env, actions):
    """(seconds, worlds reset, (steps, worlds, nu) controls, (mocap positions, mocap quaternions) per step)
    of the env stepping through `actions` (steps, worlds, action size)."""
    import numpy as np

    steps = len(actions)
    ctrls = np.empty((steps, actions.shape[1], env.mj_model.nu))
    mocap = (
        np.empty((steps, *env.worlds.mocap_pos.shape)),
        np.empty((steps, *env.worlds.mocap_quat.shape)),
    )
    resets = 0.0
    tick = time.perf_counter()
    for t in range(steps):
        resets += env.step(actions[t]).done.sum()
        ctrls[t] = env.worlds.ctrl
        mocap[0][t], mocap[1][t] = env.worlds.mocap_pos, env.worlds.mocap_quat
    return time.perf_counter() - tick, resets, ctrls, mocap


def mj_step_loop(env, datas: list, start: tuple, ctrls, mocap) -> float:
    """Seconds of a Python loop of `mujoco.mj_step` replaying `ctrls` and `mocap` (as `env_round` gives
    them) over one `MjData` per world from the starting (qpos, qvel) `start`."""
    import mujoco

    for w, d in enumerate(datas):
        d.qpos[:], d.qvel[:] = start[0][w], start[1][w]
    tick = time.perf_counter()
    for t in range(len(ctrls)):
        for w, d in enumerate(datas):
            d.ctrl[:] = ctrls[t, w]
            d.mocap_pos[:], d.mocap_quat[:] = mocap[0][t, w], mocap[1][t, w]
            mujoco.mj_step(env.mj_model, d, nstep=env.substeps)
    return time.perf_counter() - tick


def training_figures(
    task: str, body: str, cores: int, mode: str, dtype: str, iterations: int
) -> tuple[dict, str]:
    """Steady-state medians of a short `boxjax train --task <task>` run pinned to the first `cores` cores."""
    worlds = WORLDS_PER_CORE * cores
    batch = worlds * UNROLL
    argv = [
        sys.executable,
        "-m",
        "boxjax",
        "train",
        f"--task={task}",
        "--platform=cpu",
        f"--body={body}",
        f"--mode={mode}",
        f"--envs={worlds}",
        f"--unroll={UNROLL}",
        f"--minibatch={batch // 4}",
        f"--iterations={iterations}",
        f"--learner-dtype={dtype}",
        "--checkpoint-every=1000000",
        "--name=bench",
        *(["--teacher=none"] if task == "block" else ["--keep-going"]),
    ]
    mask = sorted(os.sched_getaffinity(0))[:cores]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            argv,
            cwd=tmp,
            check=True,
            stdout=subprocess.DEVNULL,
            preexec_fn=lambda: os.sched_setaffinity(0, mask),
        )
        with open(os.path.join(tmp, "runs", "bench", "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
    steady = rows[STEADY_FROM:]
    keys = [k for k in rows[0] if k.startswith("profile/")] + ["s_per_iteration", "steps_per_s"]
    figures = {k: statistics.median(r[k] for r in steady) for k in keys}
    figures["setup_s"] = rows[0]["setup_s"]
    return figures, shlex.join(["taskset", "-c", ",".join(map(str, mask)), *argv[1:]])


def unit_of(metric: str) -> str:
    """Unit of a training figure."""
    units = {"steps_per_s": "1/s", "profile/cpu_util": "fraction", "profile/policy_lag": "updates"}
    return "us/world-step" if metric.endswith("_us_per_world") else units.get(metric, "s")


def training_runs(core_counts: list[int]) -> list[tuple[int, str, str]]:
    """(cores, mode, learner dtype) to measure: serial below 4 cores, decoupled from 2 (both at 2 and 3),
    1 core always (the projection's base), and bf16 once at the largest count."""
    runs = []
    for c in sorted({1, *core_counts}):
        if c < 4:
            runs.append((c, "serial", "fp32"))
        if c >= 2:
            runs.append((c, "decoupled", "fp32"))
    top = runs[-1]
    return [*runs, (top[0], top[1] if top[0] >= 4 else "serial", "bf16")]


SEED_VCPUS, SEED_WORLDS, SEED_SAMPLES = 96, 432, 27648
"""The seed's CPU machine and iteration (432 worlds x 64 steps), the projections' target."""
PROJECTION_ASSUMPTIONS = (
    "96 vCPU = 48 cores x 2 SMT threads, each vCPU as fast as one of this machine's CPUs; 24 vCPUs go to "
    "3 learners (8 each), 72 to collectors (the seed's split). Collection: the env step and policy cost per "
    "world-step of this machine's 1-core training run, at 80 % parallel efficiency (research notes: 81 % "
    "at 16 threads). "
    "Update: this machine's 1-core learner seconds per sample (this project's default 2x256 networks, 4 "
    "epochs, 4 minibatches), over 24 vCPUs at 70 % efficiency, plus a 3 ms gloo all-reduce per minibatch "
    "(notes: 3.0-3.3 ms for 5.3 MB). Decoupled: s/iteration = max(collect, update). Batch: the seed's "
    "27,648 samples (432 worlds x 64 steps). No memory-bandwidth, NUMA or turbo effects."
)


def projection_rows(env_us: float, policy_us: float, learn_s_per_sample_core: float) -> list[tuple]:
    """Steps/s and s/iteration projected to 96 vCPUs (see PROJECTION_ASSUMPTIONS)."""
    samples, minibatches, epochs = SEED_SAMPLES, 4, 4
    collect_s = samples * (env_us + policy_us) * 1e-6 / (72 * 0.8)
    update_s = samples * learn_s_per_sample_core / (24 * 0.7) + minibatches * epochs * 3e-3
    iteration_s = max(collect_s, update_s)
    return [
        ("projected_collect_s_96vcpu", collect_s, "s"),
        ("projected_update_s_96vcpu", update_s, "s"),
        ("projected_s_per_iteration_96vcpu", iteration_s, "s"),
        ("projected_steps_per_s_96vcpu", samples / iteration_s, "1/s"),
    ]


SCALED_ASSUMPTIONS = (
    "The largest measured decoupled run's steps/s times 96 / its CPUs: assumed linear in CPUs (the row's "
    "speedup_vs_1_cpu says how this machine scaled up to that run), each vCPU as fast as one of this "
    "machine's CPUs, the same batch shape per CPU. "
    "s/iteration for the seed's 27,648 samples. No memory-bandwidth, NUMA or turbo effects."
)


def scaled_rows(steps_per_s: float, cores: int) -> list[tuple]:
    """Steps/s and s/iteration of a measured `cores`-CPU run scaled to 96 vCPUs (SCALED_ASSUMPTIONS)."""
    scaled = steps_per_s * SEED_VCPUS / cores
    return [
        ("scaled_steps_per_s_96vcpu", scaled, "1/s"),
        ("scaled_s_per_iteration_96vcpu", SEED_SAMPLES / scaled, "s"),
    ]


def projections(measured: dict[tuple[int, str, str], dict]) -> list[tuple[str, float, str, dict]]:
    """The 96-vCPU rows (metric, value, unit, extra fields) from the training figures by (cores, mode,
    dtype): the cost model from the 1-core serial run, and the largest decoupled fp32 run scaled."""
    one = measured[(1, "serial", "fp32")]
    samples = WORLDS_PER_CORE * UNROLL
    policy_us = 1e6 * one["profile/collector_policy_s"] / samples
    env_us = one["profile/env_step_us_per_world"]
    learn = one["profile/learner_update_s"] / samples
    model = {"assumptions": PROJECTION_ASSUMPTIONS}
    rows = [(*row, model) for row in projection_rows(env_us, policy_us, learn)]
    decoupled = [c for (c, mode, dtype) in measured if mode == "decoupled" and dtype == "fp32"]
    if decoupled:
        top = max(decoupled)
        top_steps = measured[(top, "decoupled", "fp32")]["steps_per_s"]
        scaled = {
            "assumptions": SCALED_ASSUMPTIONS,
            "from_cores": top,
            "speedup_vs_1_cpu": top_steps / one["steps_per_s"],
        }
        rows += [(*row, scaled) for row in scaled_rows(top_steps, top)]
    return rows


def main(argv: list[str] | None = None) -> int:
    """Measure, project, write the rows."""
    args = parse(argv)
    from boxjax import platform

    platform.configure("cpu")
    device, available = device_name(), len(os.sched_getaffinity(0))
    date = bench_rows.now()
    command = bench_rows.command("python experiments/bench_cpu.py", argv)
    common = {"bench": "cpu", "device": device, "body": args.body, "task": args.task, "date": date}
    common["versions"] = versions()
    common["commit"] = bench_rows.commit()
    with bench_rows.Writer(bench_rows.rows_path(args.out, "cpu", device, date), common) as out:

        def write(metric, value, unit, worlds, cores, cmd=command, **extra):
            row = {"worlds": worlds, "cores": cores, "metric": metric, "value": value, "unit": unit}
            out.write({**row, "command": cmd, "load_avg": os.getloadavg()[0], **extra})
            print(f"{metric:34s} {value:12.4g} {unit:18s} cores={cores} worlds={worlds} {extra or ''}")

        for metric, value, unit in env_step_rows(args.task, args.body, args.env_worlds, args.env_steps):
            write(metric, value, unit, args.env_worlds, 1, threads=1)
        measured = {}
        core_counts = [c for c in map(int, args.cores.split(",")) if c <= available]
        for cores, mode, dtype in [] if args.env_only else training_runs(core_counts):
            figures, cmd = training_figures(args.task, args.body, cores, mode, dtype, args.iterations)
            measured[(cores, mode, dtype)] = figures
            for metric, value in figures.items():
                worlds = WORLDS_PER_CORE * cores
                write(metric, value, unit_of(metric), worlds, cores, cmd, mode=mode, learner_dtype=dtype)
        for metric, value, unit, extra in projections(measured) if measured else []:
            write(metric, value, unit, SEED_WORLDS, SEED_VCPUS, projected=True, **extra)
    print(f"rows written to {out.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
