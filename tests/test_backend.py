"""The physics backend interface (`boxjax.physics.backend`): both implementations, their read-out, errors."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from boxjax import envs
from boxjax.envs.stance.env import StanceConfig
from boxjax.physics import backend, cpu, mjx


def _stack_of_boxes(memory: str) -> mujoco.MjModel:
    """Eight boxes dropped in a column onto a plane, in an arena of `memory` bytes."""
    bodies = "".join(
        f'<body pos="0 0 {0.1 + 0.21 * i}"><freejoint/><geom type="box" size=".1 .1 .1"/></body>'
        for i in range(8)
    )
    plane = '<geom type="plane" size="5 5 .1"/>'
    xml = f'<mujoco><size memory="{memory}"/><worldbody>{plane}{bodies}</worldbody></mujoco>'
    return mujoco.MjModel.from_xml_string(xml)


def _settle(model: mujoco.MjModel) -> tuple[cpu.Worlds, list[cpu.StepOutcome]]:
    worlds = cpu.make_worlds(model, 2)
    return worlds, [cpu.step(worlds, 4) for _ in range(100)]


def test_the_c_engine_reports_constraint_rows_dropped_for_want_of_arena():
    """MuJoCo drops the constraints that do not fit its arena (warning CNSTRFULL) and steps on, so the boxes
    fall through the floor: the C backend flags those worlds as overflowed; with room, nothing is flagged and
    the boxes rest on the plane. (40 kB was measured to drop the rows of the settled stack.)"""
    worlds, outcomes = _settle(_stack_of_boxes("40K"))
    overflow = np.bitwise_or.reduce([o.overflow for o in outcomes])
    assert np.all(overflow & cpu.OVERFLOW_BITS["constraint_arena"])
    assert np.all(worlds.qpos[:, 2] < -0.5), "the dropped rows let the boxes fall: the case is real"
    figures = cpu.CBackend().figures(
        cpu.view(worlds, outcomes[-1]).replace(overflow=jnp.asarray(overflow[0]))
    )
    assert figures["overflow/constraint_arena"] == 1.0
    assert set(figures) == set(cpu.FIGURE_NAMES)

    roomy, outcomes = _settle(_stack_of_boxes("2M"))
    assert not any(o.overflow.any() or o.failed.any() for o in outcomes)
    assert np.all(roomy.qpos[:, 2] > 0.05)


def test_a_task_on_the_c_engine_builds_its_params_but_cannot_step_in_a_trace():
    env = envs.make("stance", body="simple", impl="mujoco-c", episode_s=0.5)
    assert env.backend.impl == "mujoco-c"
    params = env.default_params()
    assert params.model is None and isinstance(params.template, cpu.PhysicsView)
    np.testing.assert_array_equal(params.template.qpos, env.mj_model.qpos0.astype(np.float32))
    state = env.reset(params, jax.random.PRNGKey(0))
    assert set(cpu.FIGURE_NAMES) <= set(state.metrics)
    with pytest.raises(TypeError, match="boxjax.envs.cpu.CpuEnv"):
        env.step(params, state, jnp.zeros(env.action_size))


def test_the_mjx_backend_is_the_module_functions_with_its_config():
    env = envs.make("stance", body="simple", impl="jax", num_worlds=3)
    b = env.backend
    assert isinstance(b, mjx.MjxBackend) and b.impl == "jax" and b.config.num_worlds == 3
    budget = StanceConfig().contact_budget()
    assert (b.config.contacts_per_world, b.config.njmax) == (budget.ncon_per_world, budget.njmax)
    assert b.figure_names == mjx.FIGURE_NAMES


def test_bad_backends_are_named():
    with pytest.raises(ValueError, match="unknown physics impl 'bullet'; valid: auto, jax, warp, mujoco-c"):
        backend.make("bullet", 8, 8)
    with pytest.raises(ValueError, match="takes no MJX options"):
        backend.make("mujoco-c", 8, 8, graph_mode="warp")
    with pytest.raises(ValueError, match="takes no MJX options, got \\['graph_mode'\\]"):
        envs.make("stance", body="simple", impl="mujoco-c", graph_mode="warp")
    with pytest.raises(ValueError, match="derived fields \\['qacc'\\] are not readable"):
        backend.make("mujoco-c", 8, 8, derived=("qacc",))
