"""Stance task on the CPU (MJX's JAX implementation, the simple body, few worlds)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from boxjax import envs
from boxjax.envs.base import EpisodeSummary
from boxjax.envs.stance import env as stance
from boxjax.envs.wrappers import autoreset_step, batch_reset
from boxjax.rl import ppo
from boxjax.rl.rollout import init_rollout
from boxjax.rl.train_step import init_train_state, make_train_iteration

WORLDS = 4
CONFIG = ppo.PPOConfig(
    num_envs=WORLDS, unroll_length=4, minibatch_size=8, num_epochs=1, policy_hidden=(32,), value_hidden=(32,)
)


@functools.cache
def env():
    return envs.make("stance", body="simple", impl="jax", num_worlds=WORLDS, episode_s=0.5)


@functools.cache
def params():
    return env().default_params()


@functools.cache
def jitted():
    e = env()
    reset = jax.jit(lambda p, keys: batch_reset(e, p, keys))
    step = jax.jit(lambda p, s, f, a: autoreset_step(e, p, s, f, a))
    return reset, step


def _float64_leaves(tree):
    return [x for x in jax.tree.leaves(tree) if hasattr(x, "dtype") and x.dtype == np.float64]


def test_reset_step_shapes_finite_and_float32():
    reset, step = jitted()
    keys = jax.random.split(jax.random.PRNGKey(0), WORLDS)
    state = reset(params(), keys)
    assert state.obs.shape == (WORLDS, env().observation_size)
    action = jnp.zeros((WORLDS, env().action_size))
    nxt, stepped = step(params(), state, state, action)
    for s in (state, nxt, stepped):
        assert s.obs.dtype == jnp.float32 and s.reward.dtype == jnp.float32
        assert bool(jnp.all(jnp.isfinite(s.obs))) and bool(jnp.all(jnp.isfinite(s.reward)))
        assert not _float64_leaves((s.obs, s.reward, s.done, s.truncation, s.metrics, s.info))
    assert set(stepped.metrics) >= {"reward/pose", "reward/feet", "fall", "overflow/nefc"}


def test_same_key_same_trajectory():
    reset, step = jitted()
    keys = jax.random.split(jax.random.PRNGKey(1), WORLDS)
    actions = jax.random.uniform(jax.random.PRNGKey(2), (3, WORLDS, env().action_size), minval=-1, maxval=1)

    def run():
        s = reset(params(), keys)
        first = s
        for a in actions:
            s, _ = step(params(), s, first, a)
        return s

    a, b = run(), run()
    np.testing.assert_array_equal(np.asarray(a.data.qpos), np.asarray(b.data.qpos))
    np.testing.assert_array_equal(np.asarray(a.obs), np.asarray(b.obs))


def test_masked_reset_replaces_only_finished_worlds():
    reset, step = jitted()
    state = reset(params(), jax.random.split(jax.random.PRNGKey(3), WORLDS))
    first = reset(params(), jax.random.split(jax.random.PRNGKey(4), WORLDS))
    # World 0 is one step from its time limit: it must come back as its fresh reset state.
    limit = env().config.max_steps
    state = state.replace(info=state.info.replace(step=state.info.step.at[0].set(limit - 1)))
    nxt, stepped = step(params(), state, first, jnp.zeros((WORLDS, env().action_size)))
    assert float(stepped.done[0]) == 1.0 and float(stepped.truncation[0]) == 1.0
    np.testing.assert_array_equal(np.asarray(nxt.data.qpos[0]), np.asarray(first.data.qpos[0]))
    assert int(nxt.info.step[0]) == 0
    assert bool(jnp.all(nxt.info.step[1:] == 1))
    np.testing.assert_array_equal(np.asarray(nxt.data.qpos[1:]), np.asarray(stepped.data.qpos[1:]))


def _summary(episodes, falls, length, world_steps):
    f = jnp.float32
    return EpisodeSummary(
        episodes=f(episodes),
        terminated=f(falls),
        return_sum=f(0),
        length_sum=f(length),
        world_steps=f(world_steps),
    )


def test_curriculum_waits_then_rises_only_when_falls_are_rare():
    e = env()
    wait = e.config.wait_episodes * e.config.max_steps
    full_length = 10 * e.config.max_steps
    cur = e.init_curriculum()
    cur = e.update_curriculum(cur, _summary(10, 0, full_length, wait - 1))
    assert int(cur.level) == 0  # not waited long enough
    cur = e.update_curriculum(cur, _summary(10, 0, full_length, 1))
    assert int(cur.level) == 1 and float(cur.episodes) == 0.0
    cur = e.update_curriculum(cur, _summary(10, 9, 10, wait))
    assert int(cur.level) == 1  # too many falls
    amp = e.apply_curriculum(params(), cur.replace(level=jnp.int32(e.config.levels))).amplitude
    assert float(amp) == 1.0


def test_early_falls_of_a_level_do_not_block_it_forever():
    """Each window is judged on its own: a bad start does not count against later windows."""
    e = env()
    wait = e.config.wait_episodes * e.config.max_steps
    cur = e.update_curriculum(e.init_curriculum(), _summary(1000, 900, 1000, wait))
    assert int(cur.level) == 0 and float(cur.last_fall_rate) == pytest.approx(0.9)
    cur = e.update_curriculum(cur, _summary(100, 0, 100 * e.config.max_steps, wait))
    assert int(cur.level) == 1 and float(cur.last_fall_rate) == 0.0


def _solve_stats(worlds: int, episodes: float, falls: float, world_steps: float = 1.0) -> EpisodeSummary:
    """An iteration's stats in which `episodes` begun at full amplitude ended, `falls` of them by a fall."""
    f = jnp.float32
    counts = {stance.SOLVE_EPISODES: f(episodes), stance.SOLVE_FALLS: f(falls)}
    return _summary(episodes, falls, 0, world_steps).replace(worlds=f(worlds), counts=counts)


def test_solved_only_by_episodes_begun_at_full_amplitude_one_per_world_with_few_falls():
    """The seed's rule: at full amplitude, once at least one episode per world that began there has ended,
    solved when at most 5 % of them fell (the rest ended by the time limit: the full 10 s)."""
    e = env()
    full = e.init_curriculum().replace(level=jnp.int32(e.config.levels))

    def solved(cur, *stats):
        for s_ in stats:
            cur = e.update_curriculum(cur, s_)
        return bool(e.solved(cur, stats[-1])), cur

    assert solved(full, _solve_stats(100, 100, 5))[0]
    assert not solved(full, _solve_stats(100, 100, 6))[0]  # falls at full amplitude: not solved
    below = full.replace(level=jnp.int32(e.config.levels - 1))
    assert not solved(below, _solve_stats(100, 100, 0))[0]
    # fewer episodes than worlds are not judged yet; they add up over iterations
    ok, cur = solved(full, _solve_stats(100, 60, 0))
    assert not ok and float(cur.solve_episodes) == 60.0
    assert solved(cur, _solve_stats(100, 40, 1))[0]
    # a failed judgement starts the count again: earlier falls do not count against later episodes
    ok, cur = solved(full, _solve_stats(100, 100, 50))
    assert not ok and float(cur.solve_episodes) == 0.0
    assert solved(cur, _solve_stats(100, 100, 0))[0]


def test_a_short_window_cannot_declare_a_solve():
    """Episodes that ended early in a window (falls, or old episodes that began below full amplitude) do
    not make a solve: only episodes begun at full amplitude count, at least one per world."""
    e = env()
    steps = e.config.max_steps
    full = e.init_curriculum().replace(level=jnp.int32(e.config.levels))
    judged = _summary(100, 0, 100 * steps, e.config.wait_episodes * steps).replace(worlds=jnp.float32(100))
    cur = e.update_curriculum(full, judged)  # a judged window of perfect episodes, none begun at full
    assert not bool(e.solved(cur, judged))
    cur = e.update_curriculum(
        cur, _solve_stats(100, 99, 0)
    )  # one short of a full-amplitude episode per world
    assert not bool(e.solved(cur, judged))


def test_the_step_counts_the_episodes_begun_at_full_amplitude():
    reset, step = jitted()
    action = jnp.zeros((WORLDS, env().action_size))
    for amplitude, began_full in ((0.5, 0.0), (1.0, 1.0)):
        p = params().replace(amplitude=jnp.float32(amplitude))
        state = reset(p, jax.random.split(jax.random.PRNGKey(3), WORLDS))
        np.testing.assert_array_equal(np.asarray(state.info.began_full), began_full)
        last = state.replace(info=state.info.replace(step=state.info.step + env().config.max_steps - 1))
        _, stepped = step(p, last, state, action)  # every world reaches the time limit (or falls)
        ended = np.asarray(stepped.done)
        np.testing.assert_array_equal(np.asarray(stepped.metrics[stance.SOLVE_EPISODES]), ended * began_full)


def test_bad_body_and_option_are_named():
    with pytest.raises(ValueError, match="muscular-fast"):
        envs.make("stance", body="bantam")
    with pytest.raises(ValueError, match="unknown StanceConfig options"):
        envs.make("stance", body="simple", episode_seconds=3)
    with pytest.raises(ValueError, match="valid: stance"):
        envs.make("sparring")


def test_the_convex_collision_cap_reaches_every_engine_and_the_run_description():
    """`ccd_iterations` (the learning check of the cap) sets the model's cap for MuJoCo Warp and MuJoCo C
    and is recorded, so a checkpoint of the other cap does not resume; at the built cap the description is
    the one of runs from before the field (their checkpoints still resume)."""
    from boxjax.envs.cpu import CpuEnv
    from boxjax.mjcf import CCD_ITERATIONS
    from boxjax.models import checkpoint

    built = envs.make("stance", body="simple", impl="jax")
    assert built.mj_model.opt.ccd_iterations == CCD_ITERATIONS
    assert "ccd_iterations" not in built.describe()["config"]
    capped = envs.make("stance", body="simple", impl="warp", ccd_iterations=35)
    assert capped.mj_model.opt.ccd_iterations == 35
    assert capped.default_params().model.opt._impl.ccd_iterations == 35  # MuJoCo Warp's model got it
    assert CpuEnv(capped.config).mj_model.opt.ccd_iterations == 35
    assert capped.describe()["config"]["ccd_iterations"] == 35
    with pytest.raises(checkpoint.CheckpointMismatchError, match="ccd_iterations"):
        checkpoint.check_resume({**built.describe(), "format": checkpoint.FORMAT}, capped.describe())
    with pytest.raises(ValueError, match="ccd_iterations"):
        envs.make("stance", body="simple", ccd_iterations=0)


def test_the_named_solver_options_reach_every_engine_and_the_run_description():
    """`solver` and `solver_iterations` (named options that change the physics) set the model's solver
    for MJX and MuJoCo C and are recorded; as built (Newton, the seed's cap) runs describe themselves as
    before."""
    import mujoco

    from boxjax.envs.cpu import CpuEnv
    from boxjax.mjcf import SOLVER_ITERATIONS

    built = envs.make("stance", body="simple", impl="jax")
    assert built.mj_model.opt.iterations == SOLVER_ITERATIONS == 4
    assert built.mj_model.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    assert not {"solver", "solver_iterations"} & set(built.describe()["config"])
    fast = envs.make("stance", body="simple", impl="jax", solver="cg", solver_iterations=2)
    assert fast.default_params().model.opt.iterations == 2
    assert fast.default_params().model.opt.solver == mujoco.mjtSolver.mjSOL_CG
    c_model = CpuEnv(fast.config).mj_model
    assert (c_model.opt.iterations, c_model.opt.solver) == (2, mujoco.mjtSolver.mjSOL_CG)
    assert {"solver": "cg", "solver_iterations": 2}.items() <= fast.describe()["config"].items()
    with pytest.raises(ValueError, match="unknown solver 'pgs'; valid: newton, cg"):
        envs.make("stance", body="simple", solver="pgs")
    with pytest.raises(ValueError, match="solver_iterations"):
        envs.make("stance", body="simple", solver_iterations=0)


def test_fused_stance_iteration_runs_without_retrace():
    e = env()
    key = jax.random.PRNGKey(0)
    ts, rs = ppo.own_buffers((init_train_state(e, CONFIG, key), init_rollout(e, params(), key, WORLDS)))
    fn = make_train_iteration(e, CONFIG)
    for _ in range(3):
        ts, rs, metrics = fn(ts, rs, params())
    assert fn._cache_size() == 1
    figures = {k: float(v) for k, v in metrics.items()}
    assert all(np.isfinite(v) for v in figures.values())
    assert figures["env/overflow/nefc"] == 0.0
    assert int(ts.iteration) == 3


def test_non_finite_physics_resets_that_world_and_is_no_fall():
    """A NaN in one world's velocities: that world's step reports it (`nan`), ends its episode as a
    truncation (not a fall) with reward 0 and is reset; the other worlds step on."""
    reset, step = jitted()
    state = reset(params(), jax.random.split(jax.random.PRNGKey(7), WORLDS))
    poisoned = state.replace(data=state.data.replace(qvel=state.data.qvel.at[1, 0].set(jnp.nan)))
    nxt, stepped = step(params(), poisoned, state, jnp.zeros((WORLDS, env().action_size)))
    np.testing.assert_array_equal(np.asarray(stepped.metrics["nan"]), [0.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(stepped.metrics["fall"])[1], 0.0)
    assert float(stepped.done[1]) == 1.0 and float(stepped.truncation[1]) == 1.0
    assert float(stepped.reward[1]) == 0.0
    np.testing.assert_array_equal(np.asarray(nxt.data.qpos[1]), np.asarray(state.data.qpos[1]))  # reset
    assert int(nxt.info.step[1]) == 0 and np.all(np.asarray(nxt.info.step)[[0, 2, 3]] == 1)
    assert bool(jnp.all(jnp.isfinite(nxt.data.qvel)))
