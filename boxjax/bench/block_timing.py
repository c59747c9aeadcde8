"""How the block bench (`boxjax.bench.block`) times the block task: its env step per variant (the full step,
the physics alone, the step without vision or scoring), the reset of every world, the walking teacher, and
the fused PPO iteration as training runs it, with the breakdown of its time into parts."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

from boxjax.bench import rows as bench_rows
from boxjax.envs.block import training

VARIANTS = ("full", "physics", "no_vision", "no_scoring")
ITERATION_PARTS = ("physics", "vision", "scoring", "ik", "teacher", "other", "update")
"""Iteration table columns (s per iteration); other = collect - physics - vision - scoring - IK - teacher."""
_START_S = time.perf_counter()


def progress(message: str) -> None:
    """One line of progress with the seconds since the bench started (a run cut short still shows where)."""
    print(f"[bench_block +{time.perf_counter() - _START_S:.0f} s] {message}", flush=True)


ABLATED = {"no_vision": "vision", "no_scoring": "scoring", "no_ik": "ik"}
"""The variants that leave one part of the step out, and the part (`BlockConfig.ablate`)."""


def variant_env(name: str, body: str, worlds: int, teacher: str = "", physics: dict | None = None):
    """The block env for one variant ("full" and "physics" are the full env, the others leave the part
    `ABLATED` names out), with the walking teacher `teacher` beside it (`BlockConfig.teacher`: '' none,
    'untrained' fresh weights), the physics options `physics` of `envs.make` (e.g. `graph_mode`; None: the
    defaults) and, under its key "mj_options", fields of the model's MuJoCo options set before the model
    goes to the device."""
    from boxjax import envs

    options = dict(physics or {})
    mj_options = options.pop("mj_options", {})
    ablate = (ABLATED[name],) if name in ABLATED else ()
    env = envs.make("block", body=body, num_worlds=worlds, teacher=teacher, ablate=ablate, **options)
    for option, value in mj_options.items():
        setattr(env.mj_model.opt, option, value)
    return env


def time_variant(
    name: str, body: str, worlds: int, unroll: int, repeats: int, first, physics: dict | None = None
) -> tuple[float, float, float]:
    """(first-call s incl. compile, best s per `unroll` steps of all worlds, peak overflowing worlds),
    starting from (and auto-resetting to) the batched reset state `first`; `physics` as `variant_env`."""
    import jax
    import jax.numpy as jnp

    from boxjax.envs.wrappers import autoreset_step
    from boxjax.physics import mjx

    env = variant_env(name, body, worlds, physics=physics)
    params = env.default_params()
    if name == "physics":

        @jax.jit
        def run(data, model):
            def body_fn(d, _):
                return jax.vmap(lambda x: mjx.step(model, x, env.substeps))(d), None

            return jax.lax.scan(body_fn, data, None, length=unroll)[0], jnp.zeros(())

        first_s, best, (_, overflow) = bench_rows.timed(run, first.data, params.model, repeats=repeats)
        return first_s, best, float(overflow)
    zero_action = jnp.zeros((worlds, env.action_size), jnp.float32)

    @jax.jit
    def run(state, fresh, p):
        def body_fn(s, _):
            s = autoreset_step(env, p, s, fresh, zero_action)[0]
            overflow = sum(v for k, v in s.metrics.items() if k.startswith("overflow/"))
            return s, jnp.max(overflow)

        state, overflow = jax.lax.scan(body_fn, state, None, length=unroll)
        return state, jnp.max(overflow)

    first_s, best, (_, overflow) = bench_rows.timed(run, first, first, params, repeats=repeats)
    return first_s, best, float(overflow)


def time_reset(name: str, body: str, worlds: int, repeats: int, physics: dict | None = None):
    """(best seconds of one jitted reset of every world (variant `name`), the batched reset state)."""
    import jax

    from boxjax.envs.wrappers import batch_reset

    env = variant_env(name, body, worlds, physics=physics)
    reset = jax.jit(lambda p, keys: batch_reset(env, p, keys))
    keys = jax.random.split(jax.random.PRNGKey(0), worlds)
    _, best, state = bench_rows.timed(reset, env.default_params(), keys, repeats=repeats)
    return best, state


def _timings(fn, *args, repeats: int) -> list[float]:
    """Seconds of each of `repeats` calls of `fn(*args)` after one untimed call (the compile), each blocked
    on its result."""
    import jax

    jax.block_until_ready(fn(*args))
    seconds = []
    for _ in range(repeats):
        tick = time.perf_counter()
        jax.block_until_ready(fn(*args))
        seconds.append(time.perf_counter() - tick)
    return seconds


def time_teacher(env, params, first, repeats: int) -> tuple[float, float | None]:
    """(seconds, spread) of the teacher's targets for every world once: the best time of the targets less
    the best time of calling a jitted function with the same arguments (inside the fused iteration there is
    no such call, and with the block world's ~500 arrays as arguments the call alone took 3.7 ms on the
    CPU, 64 worlds, where the targets took 0.5 ms more), as measured, negative where the call's cost and
    its noise exceed the work; the spread is the two timings' standard deviations added in quadrature
    (None with fewer than 2 repeats). (0.0, 0.0) without a teacher."""
    import jax

    from boxjax.rl import rollout

    if not rollout.has_distill_target(env):
        return 0.0, 0.0
    targets = jax.jit(lambda p, s: rollout.distill_targets(env, p, s))
    call = jax.jit(lambda p, s: s.data.qpos[:, :1])
    work = _timings(targets, params, first, repeats=repeats)
    bare = _timings(call, params, first, repeats=repeats)
    spread = None
    if repeats >= 2:
        spread = (statistics.stdev(work) ** 2 + statistics.stdev(bare) ** 2) ** 0.5
    return min(work) - min(bare), spread


@dataclasses.dataclass(frozen=True)
class Case:
    """One measured shape of the iteration and how it trains."""

    body: str
    worlds: int
    unroll: int
    """Control steps per world and iteration."""
    epochs: int
    minibatch: int
    repeats: int
    """Timed runs (the best counts)."""
    teacher: str = ""
    """The walking teacher beside the policy ("", "untrained", or a teacher file)."""
    opponent: str = "simulated"
    """The opponent (`BlockConfig.opponent`)."""
    init: str | None = None
    """A block checkpoint or policy file whose model acts (None: fresh weights)."""


WARMUP_QUIET_ITERATIONS = 2
"""Iterations in a row that must capture no CUDA graph before the timed ones (the donated buffers' sets)."""
WARMUP_MAX_ITERATIONS = 8
"""At most this many warm-up iterations after the compiling one; a bench whose iterations keep capturing
is timed anyway and its rows show the captures (`it_graph_captures`)."""


def warm_up(run_once, quiet_needed: int = WARMUP_QUIET_ITERATIONS, most: int = WARMUP_MAX_ITERATIONS) -> int:
    """Calls `run_once()` (one iteration; returns the CUDA graphs it captured) until `quiet_needed` calls in a
    row captured none, at most `most` calls; returns the calls made. On an H100 (371a988, 2026-12-06) two
    warm-up iterations left the bench capturing graphs in 2 of 3 timed iterations (0.352 s best, 0.369
    median) while a training run of the same tree captured none after its first."""
    quiet = calls = 0
    while calls < most and quiet < quiet_needed:
        calls += 1
        quiet = quiet + 1 if run_once() == 0 else 0
    return calls


def time_iteration(
    case: Case, first, physics: dict | None = None, trace_dir: str | None = None, rollout_alone: bool = True
) -> dict:
    """Seconds of the fused iteration, its rollout alone and the teacher alone, from the batched reset
    state `first` after `warm_up`, and the CUDA graphs MuJoCo Warp captured per timed iteration (0 once
    warm, unless XLA keeps handing it new buffers): {compile, iteration, collect, teacher, teacher_sd,
    overflow, graph_captures, warmup_iterations}. With `trace_dir`, two more iterations run under
    `jax.profiler` (read with `trace_report.py`). Without `rollout_alone` the rollout is not timed on its
    own ("collect" is None): on a GPU its compile and its graph captures took 142 s of a 283 s bench
    (muscular 2,048 x 16, 2026-12-02)."""
    import jax

    from boxjax.physics import graphs
    from boxjax.rl.train_step import make_train_iteration

    body, worlds, unroll, repeats = case.body, case.worlds, case.unroll, case.repeats
    env, params, config, ts, rs = iteration_start(case, first, physics)
    collect_s = None
    if rollout_alone:
        collect_s = time_rollout(env, config, params, ts, rs, case)
        progress(f"{body} {worlds}x{unroll}: rollout alone {collect_s:.3f} s")
    loop = Iterations(make_train_iteration(env, config), params, ts, rs)
    compile_s = loop.first()
    progress(f"{body} {worlds}x{unroll}: iteration compiled and run once in {compile_s:.1f} s")
    warmup_iterations = warm_up(lambda: loop.run_once()[1][graphs.GRAPH_CAPTURES])
    timed = [loop.run_once() for _ in range(repeats)]
    times = [seconds for seconds, _ in timed]
    best = min(times)
    captures = sum(engine[graphs.GRAPH_CAPTURES] for _, engine in timed) / repeats
    factored = sum(engine[graphs.FUSED_FACTORIZATIONS] for _, engine in timed) / repeats
    progress(
        f"{body} {worlds}x{unroll}: iteration {best:.3f} s best, {statistics.median(times):.3f} s median, "
        f"{captures:.1f} graph captures each"
    )
    if trace_dir:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            for _ in range(2):
                loop.run()
    teacher_s, teacher_sd = time_teacher(env, params, first, repeats)
    return {
        "compile": compile_s - best,
        "iteration": best,
        "iteration_median": statistics.median(times),
        "collect": collect_s,
        "teacher": unroll * teacher_s,
        "teacher_sd": None if teacher_sd is None else unroll * teacher_sd,
        "overflow": bench_rows.overflow_worlds(loop.metrics),
        "graph_captures": captures,
        "fused_factorizations": factored,
        "warmup_iterations": warmup_iterations,
    }


def iteration_start(case: Case, first, physics: dict | None):
    """(env, its params with the teacher, PPO config, train state, rollout state from the batched reset state
    `first`) of one measured case, the two states in buffers of their own (the iteration donates them);
    the model from `case.init` where given."""
    import jax
    import jax.numpy as jnp

    from boxjax.rl import ppo
    from boxjax.rl.rollout import RolloutState
    from boxjax.rl.train_step import init_train_state

    worlds, teacher = case.worlds, case.teacher
    env = variant_env("full", case.body, worlds, teacher, physics)
    params = env.default_params().replace(teacher=env.teacher)
    config = ppo.PPOConfig(
        num_envs=worlds,
        unroll_length=case.unroll,
        num_epochs=case.epochs,
        minibatch_size=min(case.minibatch, worlds * case.unroll),
        distill_coef=training.DISTILL_COEF if teacher else 0.0,
    )
    key = jax.random.PRNGKey(0)
    zeros = jnp.zeros((worlds,), jnp.float32)
    train_state = init_train_state(env, config, key)
    if case.init:
        model = ppo.model_from(case.init, env, train_state, ppo.run_meta(env, config))
        train_state = train_state.replace(**model)
    ts, rs = ppo.own_buffers(
        (
            train_state,
            RolloutState(env=first, episode_return=zeros, episode_length=zeros),
        )
    )
    return env, params, config, ts, rs


def time_rollout(env, config, params, ts, rs, case: Case) -> float:
    """Best seconds of the rollout alone (policy, env steps, the reset of every world), from the train and
    rollout states `ts` and `rs`."""
    import jax

    from boxjax.rl.rollout import network_policy, rollout
    from boxjax.rl.train_step import make_network

    net = make_network(env, config)
    unroll, teacher = case.unroll, case.teacher

    @jax.jit
    def collect(ts, rs, p, k):
        policy = network_policy(net, ts.params, ts.normalizer, True)
        return rollout(env, p, policy, rs, k, unroll, distill=bool(teacher))[:3]

    return bench_rows.timed(collect, ts, rs, params, jax.random.PRNGKey(0), repeats=case.repeats)[1]


@dataclasses.dataclass
class Iterations:
    """The fused iteration `iteration` and what it carries from call to call (train state, rollout state,
    the last call's metrics), called as training calls it."""

    iteration: Callable
    params: Any
    ts: Any
    rs: Any
    metrics: Any = None

    def run(self) -> None:
        """One iteration, blocked on."""
        import jax

        self.ts, self.rs, self.metrics = jax.block_until_ready(self.iteration(self.ts, self.rs, self.params))

    def first(self) -> float:
        """Seconds of the first iteration (compiling it)."""
        tick = time.perf_counter()
        self.run()
        return time.perf_counter() - tick

    def run_once(self) -> tuple[float, dict[str, float]]:
        """One iteration as training runs them (the last one's figures freed first, as training reads them
        to the host before the next; with them alive XLA's allocator may hand MuJoCo Warp other addresses):
        its seconds and `graphs.since` figures."""
        from boxjax.physics import graphs

        self.metrics = None
        before = graphs.snapshot()
        tick = time.perf_counter()
        self.run()
        return time.perf_counter() - tick, graphs.since(before)


def iteration_figures(it: dict, worlds: int, unroll: int) -> list[tuple[str, float, str]]:
    """The iteration's own rows from `time_iteration`'s figures (no breakdown; no `it_collect_s` when the
    rollout was not timed alone)."""
    rows = [
        ("it_compile_s", it["compile"], "s"),
        ("s_per_iteration", it["iteration"], "s"),
        ("s_per_iteration_median", it["iteration_median"], "s"),
        ("steps_per_s", worlds * unroll / it["iteration"], "1/s"),
        ("it_collect_s", it["collect"], "s"),
        ("it_teacher_s", it["teacher"], "s"),
        ("it_teacher_sd_s", it.get("teacher_sd"), "s"),
        ("it_overflow_worlds", it["overflow"], "worlds"),
        ("it_graph_captures", it["graph_captures"], "graphs/iteration"),
        ("it_warmup_iterations", it.get("warmup_iterations"), "iterations"),
        ("it_fused_factorizations", it.get("fused_factorizations"), "worlds/iteration"),
    ]
    return [row for row in rows if row[1] is not None]


def iteration_rows(case: Case, step_s: dict, first, physics: dict) -> list[tuple[str, float, str]]:
    """The iteration's figures and its breakdown, from `time_iteration`, the per-step `step_s` (with the
    reset's seconds under "reset") and the reset state `first`; `physics` as `variant_env`."""
    it = time_iteration(case, first, physics)
    unroll = case.unroll
    ik = step_s["reset"] - time_reset("no_ik", case.body, case.worlds, case.repeats, physics)[0]
    parts = {
        "physics": unroll * step_s["physics"],
        "vision": unroll * (step_s["full"] - step_s["no_vision"]),
        "scoring": unroll * (step_s["full"] - step_s["no_scoring"]),
        "ik": ik,
        "teacher": it["teacher"],
        "update": it["iteration"] - it["collect"],
    }
    parts["other"] = it["collect"] - sum(parts[k] for k in ("physics", "vision", "scoring", "ik", "teacher"))
    rows = [r for r in iteration_figures(it, case.worlds, unroll) if r[0] != "it_teacher_s"]
    return rows + [(f"it_{part}_s", parts[part], "s") for part in ITERATION_PARTS]


def measure(body: str, worlds: int, unroll: int, repeats: int, physics: dict):
    """Every env-step figure of one body at one world count (`physics` as `variant_env`): ([(metric,
    value, unit)], {variant: s per step, "reset": s per reset of every world}, the batched reset state)."""
    reset_s, first = time_reset("full", body, worlds, repeats, physics)
    seconds, rows = {}, [("reset_ms", 1e3 * reset_s, "ms")]
    for name in VARIANTS:
        first_s, best, overflow = time_variant(name, body, worlds, unroll, repeats, first, physics)
        seconds[name] = best / unroll
        if name == "full":
            rows += [("compile_s", first_s - best, "s"), ("overflow_worlds", overflow, "worlds")]
    ms = {
        "physics": 1e3 * seconds["physics"],
        "vision": 1e3 * (seconds["full"] - seconds["no_vision"]),
        "scoring": 1e3 * (seconds["full"] - seconds["no_scoring"]),
    }
    ms["rest"] = 1e3 * seconds["full"] - sum(ms.values())
    rows += [
        ("env_steps_per_s", worlds / seconds["full"], "1/s"),
        ("env_step_ms", 1e3 * seconds["full"], "ms"),
    ]
    rows += [(f"{part}_ms", value, "ms") for part, value in ms.items()]
    return rows, {**seconds, "reset": reset_s}, first
