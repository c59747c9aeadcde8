"""Physics backend: overflow is reported, MJX (jax and warp) agree with MuJoCo's C step.

MuJoCo Warp runs here on Warp's CPU device (slow but exact enough to check wiring); on a GPU machine the
same tests run on CUDA.
"""

import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from boxjax import envs
from boxjax.envs.wrappers import autoreset_step, batch_reset
from boxjax.physics import mjx as physics
from boxjax.physics import one_call, passive_patch
from boxjax.rl import ppo

WORLDS = 2
# Parity tolerance on joint angles after a few control steps from the same state and controls. MJX runs
# float32 while MuJoCo C runs float64, and contact solving amplifies round-off, so the bound is loose.
PARITY_ATOL_RAD = 2e-3
# One MuJoCo Warp call per control step against one per substep: the same kernels in the same order, so
# bit-identical on Warp's CPU device (asserted there); on a GPU the order of atomic adds varies from run to
# run, and two runs of the very same step differed by 3.5e-7 rad and 2.5e-5 rad/s after five control steps
# (H200), so there these bounds apply.
ONE_CALL_ATOL_RAD = 1e-5
ONE_CALL_ATOL_RAD_PER_S = 1e-3


@functools.cache
def warp_env(contacts_per_world: int | None = None):
    env = envs.make("stance", body="simple", impl="warp", num_worlds=WORLDS, episode_s=1.0)
    if contacts_per_world is not None:
        env.backend = physics.MjxBackend(
            physics.PhysicsConfig(
                impl="warp", num_worlds=WORLDS, contacts_per_world=contacts_per_world, njmax=8
            )
        )
    return env


def test_overflow_is_reported_and_can_stop_the_run(capsys):
    env = warp_env(contacts_per_world=1)
    config = ppo.PPOConfig(
        num_envs=WORLDS,
        unroll_length=2,
        minibatch_size=4,
        num_epochs=1,
        policy_hidden=(8,),
        value_hidden=(8,),
    )
    with pytest.raises(ppo.PhysicsOverflowError, match=r"(broadphase|narrowphase) in 2 worlds"):
        ppo.train(env, config, jax.random.PRNGKey(0), iterations=2, stop_on_overflow=True)
    assert "OVERFLOW iteration 1:" in capsys.readouterr().out


def test_bad_impl_is_named():
    with pytest.raises(ValueError, match="valid: auto, jax, warp"):
        envs.make("stance", body="simple", impl="cuda")


def _five_steps_beside_the_default(**physics_options):
    """(default, variant) states after the same five control steps of `parity_env("warp")` from the same
    reset, the variant's physics built with `physics_options` (the reset is the default's: it takes no
    physics step)."""
    env, reset, step = parity_env("warp")
    variant = envs.make(
        "stance", body="simple", impl="warp", num_worlds=WORLDS, shove_speed_mps=(0.0, 0.0), **physics_options
    )
    variant_params = variant.default_params()
    variant_step = jax.jit(lambda s, a: autoreset_step(variant, variant_params, s, s, a)[1])
    state = other = reset(jax.random.split(jax.random.PRNGKey(5), WORLDS))
    actions = 0.3 * jax.random.uniform(
        jax.random.PRNGKey(6), (5, WORLDS, env.action_size), minval=-1, maxval=1
    )
    for a in actions:
        state, other = step(state, a), variant_step(other, a)
    return state, other


def _assert_steps_alike(variant, default) -> None:
    """The same state after `_five_steps_beside_the_default`: bit for bit on Warp's CPU device, to the
    one-call bounds on a GPU (the order of atomic adds varies there)."""
    np.testing.assert_array_equal(variant.data.time, default.data.time)
    if jax.default_backend() == "cpu":
        for field in ("qpos", "qvel", "qacc_warmstart", "act", "qfrc_constraint"):
            np.testing.assert_array_equal(getattr(variant.data, field), getattr(default.data, field), field)
        return
    np.testing.assert_allclose(variant.data.qpos, default.data.qpos, atol=ONE_CALL_ATOL_RAD, err_msg="qpos")
    np.testing.assert_allclose(
        variant.data.qvel, default.data.qvel, atol=ONE_CALL_ATOL_RAD_PER_S, err_msg="qvel"
    )


@pytest.mark.skipif("jax.default_backend() != 'gpu'", reason="MuJoCo Warp's graph modes exist on CUDA only")
def test_staged_graph_mode_steps_like_the_default():
    """MJX's staged mode (copies through fixed buffers, never recaptures) against its default mode, to the
    parity tolerance."""
    state, staged = _five_steps_beside_the_default(graph_mode="warp_staged_ex")
    err = float(jnp.max(jnp.abs(state.data.qpos - staged.data.qpos)))
    assert err < PARITY_ATOL_RAD, f"max |qpos staged - default| = {err:.2e}"


def test_substeps_in_one_call_step_like_one_call_each():
    """Every substep of a control step in one MuJoCo Warp call against MJX's one call per substep (the
    default): the same state after five control steps (20 physics steps), to round-off."""
    each, one = _five_steps_beside_the_default(substeps_in_one_call=True)
    assert not parity_env("warp")[0].backend.substeps_in_one_call
    assert one_call._stepper.cache_info().currsize, "the one-call stepper was never built"
    np.testing.assert_array_equal(one.data.time, each.data.time)
    if jax.default_backend() == "cpu":
        for field in ("qpos", "qvel", "qacc_warmstart", "act", "qfrc_constraint"):
            np.testing.assert_array_equal(getattr(one.data, field), getattr(each.data, field), err_msg=field)
        return
    np.testing.assert_allclose(one.data.qpos, each.data.qpos, atol=ONE_CALL_ATOL_RAD, err_msg="qpos")
    np.testing.assert_allclose(one.data.qvel, each.data.qvel, atol=ONE_CALL_ATOL_RAD_PER_S, err_msg="qvel")


def test_unrolled_solver_loop_steps_like_the_conditional_one(monkeypatch):
    """MuJoCo Warp's constraint solver repeating its iterations as passes in sequence (converged worlds
    skipping each) against its while-loop (the default): the same state after five control steps (20 physics
    steps). On Warp's CPU device bit for bit, and only the default entered a while-loop (one per physics
    step: the option reached the solver); on a GPU to the one-call bounds (atomic adds in varying order)."""
    import warp

    loops = []
    enter = warp.capture_while
    monkeypatch.setattr(warp, "capture_while", lambda *a, **k: (loops.append(1), enter(*a, **k))[1])
    default, unrolled = _five_steps_beside_the_default(solver_loop="unrolled")
    env = parity_env("warp")[0]
    assert env.backend.config.solver_loop is None
    _assert_steps_alike(unrolled, default)  # waits for the steps, whose launches are counted next
    if jax.default_backend() == "cpu":
        assert len(loops) == 5 * env.substeps


def _gravity_launches(monkeypatch) -> list[bool]:
    """A list that records, for every Warp launch from now on, whether it launched MuJoCo Warp's
    gravity-compensation kernel."""
    import importlib

    import warp

    gravity_force = importlib.import_module(passive_patch._PASSIVE)._gravity_force
    launched = []
    launch = warp.launch

    def counted(*args, **kwargs):
        launched.append((args[0] if args else kwargs["kernel"]) is gravity_force)
        return launch(*args, **kwargs)

    monkeypatch.setattr(warp, "launch", counted)
    return launched


@pytest.mark.skipif(
    "jax.default_backend() != 'cpu'",
    reason="a CUDA graph keeps the code it captured: switching needs a fresh one",
)
def test_gravity_compensation_launch_is_left_out_with_the_same_state(monkeypatch):
    """Stance (no body with gravity compensation) through five control steps with MuJoCo Warp's
    gravity-compensation kernel left out (the default) and with it launched (the patch off): the same state
    bit for bit on Warp's CPU device, and the kernel launched only without the patch (once a physics step)."""

    env, reset, step = parity_env("warp")
    keys = jax.random.split(jax.random.PRNGKey(5), WORLDS)
    actions = 0.3 * jax.random.uniform(
        jax.random.PRNGKey(6), (5, WORLDS, env.action_size), minval=-1, maxval=1
    )
    launched = _gravity_launches(monkeypatch)

    def five_steps():
        state = reset(keys)
        for a in actions:
            state = step(state, a)
        return jax.block_until_ready(state)  # MuJoCo Warp's Python runs in the computation, not at dispatch

    assert passive_patch.installed()
    patched, launches_patched = five_steps(), sum(launched)
    passive_patch.install(False)
    launched.clear()
    try:
        stock = five_steps()
    finally:
        passive_patch.install()
    assert (launches_patched, sum(launched)) == (0, 5 * env.substeps)  # one a physics step
    for field in ("qpos", "qvel", "qacc_warmstart", "act", "qfrc_constraint", "qfrc_passive"):
        np.testing.assert_array_equal(getattr(patched.data, field), getattr(stock.data, field), field)


def test_models_alike_in_size_but_not_in_gravity_compensation_are_refused(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setattr(passive_patch, "_WITHOUT_GRAVCOMP", {})
    sizes = dict(nbody=3, njnt=2, nv=2, nu=1, ngeom=2, nsite=0)
    passive_patch.register(SimpleNamespace(**sizes, ngravcomp=0))
    passive_patch.register(SimpleNamespace(**sizes, ngravcomp=0))  # the same answer again: fine
    with pytest.raises(passive_patch.FingerprintClashError, match="differ in gravity compensation"):
        passive_patch.register(SimpleNamespace(**sizes, ngravcomp=1))


GRAVCOMP_XML = """<mujoco><worldbody>
  <body gravcomp="1"><joint type="hinge" axis="1 0 0"/><geom size="0.1" pos="0 0.2 0" mass="1"/></body>
</worldbody></mujoco>"""


@pytest.mark.skipif("jax.default_backend() != 'cpu'", reason="counts launches as the Python runs: CPU only")
def test_a_model_with_gravity_compensation_keeps_its_launch(monkeypatch):
    """A body with gravity compensation, put straight through MJX (registered by the wrapped `put_model`):
    MuJoCo Warp's kernel runs for it and the compensation holds the arm up (qfrc_gravcomp not zero)."""

    from mujoco import mjx

    model = mujoco.MjModel.from_xml_string(GRAVCOMP_XML)
    passive_patch.install()
    mx = physics.quiet(mjx.put_model(model, impl="warp"))
    data = jax.vmap(lambda _: mjx.make_data(model, impl="warp", naconmax=8, njmax=8))(jnp.arange(1))
    launched = _gravity_launches(monkeypatch)
    stepped = jax.block_until_ready(jax.jit(jax.vmap(lambda d: mjx.step(mx, d)))(data))
    assert sum(launched) == 1
    assert float(jnp.abs(stepped.qfrc_gravcomp).max()) > 1.0  # about m g r = 1 x 9.81 x 0.2 N m


def test_block_dims_step_like_mujoco_warps_own(monkeypatch):
    """MuJoCo Warp's Newton Hessian Cholesky launched with two warps per world (`block_dims`) against its own
    one: the option reached that launch, and the same state after five control steps. On Warp's CPU device
    bit for bit (a CPU block runs one lane); on a GPU to the one-call bounds (its tile reductions may sum in
    another order)."""
    import warp

    sizes = []
    launch = warp.launch_tiled

    def spy(kernel, *args, **kwargs):
        if "cholesky_blocked" in kernel.key:
            sizes.append(kwargs.get("block_dim"))
        return launch(kernel, *args, **kwargs)

    monkeypatch.setattr(warp, "launch_tiled", spy)
    default, wider = _five_steps_beside_the_default(block_dims=(("update_gradient_cholesky_blocked", 64),))
    _assert_steps_alike(wider, default)  # waits for the steps, whose launches are counted next
    assert 64 in sizes, f"the blocked Cholesky launched with block sizes {sorted(set(sizes))}"


def test_bad_block_dims_are_named():
    def make(impl="warp", **dims):
        return envs.make("stance", body="simple", impl=impl, block_dims=tuple(dims.items()))

    with pytest.raises(ValueError, match="unknown MuJoCo Warp block dim 'cholesky'; valid: segmented_sort"):
        make(cholesky=64)
    with pytest.raises(ValueError, match="ray=48: threads must be a positive multiple of 32 up to 1024"):
        make(ray=48)
    with pytest.raises(ValueError, match="ray=2048: threads must be"):
        make(ray=2048)
    with pytest.raises(ValueError, match="must be an int number of threads, got '64'"):
        make(ray="64")
    with pytest.raises(ValueError, match="block_dims apply to impl 'warp' only, not 'jax'"):
        make(impl="jax", ray=64)
    with pytest.raises(ValueError, match="block dim given twice: ray"):
        envs.make("stance", body="simple", impl="warp", block_dims=(("ray", 64), ("ray", 128)))
    with pytest.raises(ValueError, match="MuJoCo's C engine takes no MJX options"):
        make(impl="mujoco-c", ray=64)


def test_a_bad_solver_loop_is_named():
    with pytest.raises(ValueError, match="unknown solver loop 'while'; valid: conditional, unrolled"):
        envs.make("stance", body="simple", impl="warp", solver_loop="while")
    with pytest.raises(ValueError, match="solver loop 'unrolled' applies to impl 'warp' only, not 'jax'"):
        envs.make("stance", body="simple", impl="jax", solver_loop="unrolled")


def test_graph_mode_reaches_the_physics_and_a_bad_one_is_named():
    env = envs.make("stance", body="simple", impl="warp", num_worlds=WORLDS, graph_mode="warp_staged_ex")
    assert env.backend.config.graph_mode == "warp_staged_ex"
    if jax.default_backend() != "gpu":
        with pytest.raises(ValueError, match="graph_mode 'warp_staged_ex' needs MuJoCo Warp on a CUDA GPU"):
            env.default_params()
    with pytest.raises(
        ValueError, match="unknown graph mode 'jax'; valid: warp, warp_staged, warp_staged_ex"
    ):
        envs.make("stance", body="simple", impl="warp", graph_mode="jax")
    with pytest.raises(ValueError, match="graph mode 'warp' applies to impl 'warp' only, not 'jax'"):
        envs.make("stance", body="simple", impl="jax", graph_mode="warp")


def _c_rollout(env, qpos0, ctrls):
    """MuJoCo C: the same control sequence from the same state, `substeps` mj_step per control."""
    model = env.mj_model
    data = mujoco.MjData(model)
    data.qpos[:] = qpos0
    out = []
    for ctrl in ctrls:
        data.ctrl[:] = ctrl
        mujoco.mj_step(model, data, nstep=env.substeps)
        out.append(data.qpos.copy())
    return np.array(out)


@functools.cache
def parity_env(impl: str):
    """The simple stance world without shoves, and its jitted reset and step (shared by the parity tests)."""
    env = envs.make("stance", body="simple", impl=impl, num_worlds=WORLDS, shove_speed_mps=(0.0, 0.0))
    params = env.default_params()
    reset = jax.jit(lambda keys: batch_reset(env, params, keys))
    step = jax.jit(lambda s, a: autoreset_step(env, params, s, s, a)[1])
    return env, reset, step


@pytest.mark.parametrize("impl", ["jax", "warp"])
def test_mjx_matches_mujoco_c_for_the_first_steps(impl):
    env, reset, step = parity_env(impl)
    first = reset(jax.random.split(jax.random.PRNGKey(5), WORLDS))
    actions = 0.3 * jax.random.uniform(
        jax.random.PRNGKey(6), (5, WORLDS, env.action_size), minval=-1, maxval=1
    )
    state, qpos, ctrls = first, [], []
    for a in actions:
        state = step(state, a)
        qpos.append(np.asarray(state.data.qpos))
        ctrls.append(np.asarray(state.data.ctrl))
    qpos, ctrls = np.array(qpos), np.array(ctrls)
    for w in range(WORLDS):
        want = _c_rollout(env, np.asarray(first.data.qpos[w]), ctrls[:, w])
        err = np.max(np.abs(qpos[:, w] - want))
        assert err < PARITY_ATOL_RAD, f"world {w}: max |qpos - C| = {err:.2e}"


def test_warp_and_jax_give_the_same_first_rewards():
    rewards = {}
    for impl in ("jax", "warp"):
        env, reset, step = parity_env(impl)
        state = step(
            reset(jax.random.split(jax.random.PRNGKey(9), WORLDS)), jnp.zeros((WORLDS, env.action_size))
        )
        rewards[impl] = np.asarray(state.reward)
    np.testing.assert_allclose(rewards["warp"], rewards["jax"], atol=2e-3)


def test_solver_iterations_are_counted_per_world_and_step():
    """The simple stance world on MuJoCo Warp, random actions: every world-step's solver ran 1 to the cap's
    iterations (feet on the floor: never 0), and the table's shares add up per column."""
    from boxjax.bench import solver_iterations

    env = parity_env("warp")[0]
    cap = int(env.mj_model.opt.iterations)

    def act(state, key):
        return 0.3 * jax.random.uniform(key, (WORLDS, env.action_size), minval=-1)

    counts, joined = solver_iterations.collect(
        env, env.default_params(), act, WORLDS, 3, jax.random.PRNGKey(2)
    )
    assert counts.shape == joined.shape == (3, WORLDS) and not joined.any()  # one tree: nothing to join
    assert counts.min() >= 1 and counts.max() <= cap
    table = solver_iterations.shares_table(counts, cap).splitlines()[2:]
    for column in (1, 2):
        assert sum(float(row.split(" | ")[column].rstrip("% |")) for row in table) == pytest.approx(
            100, abs=0.3
        )
    with pytest.raises(ValueError, match="ran 5 iterations, above its cap of 4"):
        solver_iterations.histogram(np.array([[1, 5]]), 4)
    # geoms 0 (the floor: the world body), 1-2 on tree 0, 3 on tree 1; world 1 has a contact across trees
    tree_of_geom = np.array([-1, 0, 0, 1])
    geoms, world_of = np.array([[0, 1], [1, 2], [2, 3]]), np.array([0, 0, 1])
    assert solver_iterations.joined_trees(tree_of_geom, geoms, world_of, 3).tolist() == [False, True, False]
