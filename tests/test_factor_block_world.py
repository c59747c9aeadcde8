"""Our factorisation in the two-fighter block world, stepped: the default against MuJoCo Warp's own.

The block task's world (our muscular fighter, the simulated opponent, the bag) on MuJoCo Warp (Warp's CPU
device) through the task's own physics backend. Its default physics (`PhysicsConfig` as the task makes it:
our kernel factors both fighters' trees, `factor_trees` "all") and the same with MuJoCo Warp's own
factorisation (`fused_factor=False`, the CLI's `--factor stock`) each take 5 physics steps (a control step)
from 16 states whose contacts join the two trees: the opponent's anchor put `GUARD_PRESS_M` nearer, both
fighters hold their guard (their stance targets plus noise, per seed) and his gloves and forearms press on
ours. Both runs are float32 and differ only in the order in which the factorisation sums; the tolerances
are four times the larger of what was measured at commit time between them and between two stock runs
whose starts differ by one float32 ulp in qpos (the round-off a summation order leaves):

| after          | joint angles, ours / round-off | joint velocities, ours / round-off |
|----------------|--------------------------------|------------------------------------|
| 1 step         | 1.3e-7 / 2.4e-7 rad            | 2.8e-5 / 4.7e-5 rad/s              |
| steps 1-5      | 1.25e-5 / 1.0e-5 rad           | 1.5e-3 / 1.5e-3 rad/s              |

(the stiff contacts of pressed guards grow round-off 50-fold within a control step). A contact found in
one run only is a discontinuity any round-off may cross: a world is compared up to the step before its
contacts (the set of geom pairs) first differ between the runs; all are compared after the first step,
where both runs collide the same state.
"""

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from boxjax import envs
from boxjax.physics import factor_patch, passive_patch, put_hooks
from boxjax.physics import mjx as physics

GUARD_PRESS_M = 0.3
"""How much nearer our fighter than the punch library's distance the opponent's anchor is put: the
guards meet from about the eighth control step on."""
SEEDS, STATES_PER_SEED = 4, 4
"""Runs of guard noise, and states taken from each (every third control step with a joining contact)."""
GUARD_NOISE = 0.1
"""Uniform noise on both fighters' stance targets (rad) at every control step."""
STEPS = 5
"""Physics steps from each state."""
FIRST_STEP_TOL_RAD, FIRST_STEP_TOL_RAD_PER_S = 1e-6, 2e-4
"""Joint-angle and joint-velocity differences allowed after the first physics step."""
STEPS_TOL_RAD, STEPS_TOL_RAD_PER_S = 5e-5, 6e-3
"""The same over every step."""
MIN_COMPARED = 0.75
"""Share of worlds whose contacts must stay alike through every step."""


def _joining(model: mujoco.MjModel, data: mujoco.MjData, ours: np.ndarray, his: np.ndarray) -> int:
    """Contacts between a geom of body set `ours` and one of `his` ((nbody,) bool masks)."""
    geom = data.contact.geom[: data.ncon]
    a, b = ours[model.geom_bodyid[geom[:, 0]]], ours[model.geom_bodyid[geom[:, 1]]]
    c, d = his[model.geom_bodyid[geom[:, 0]]], his[model.geom_bodyid[geom[:, 1]]]
    return int(np.sum((a & d) | (b & c)))


def _pressed_guard_states(env) -> dict[str, np.ndarray]:
    """{field: (K, ...)} states of the block world (MuJoCo C) whose contacts join the two fighters: per
    seed, the guard with the opponent's anchor `GUARD_PRESS_M` nearer, both fighters' stance targets plus
    noise, every third control step with a joining contact, `STATES_PER_SEED` of them."""
    arena, model = env.arena, env.mj_model
    me, him = arena.index.red, arena.index.blue
    ours, his = np.isin(np.arange(model.nbody), me.body_ids), np.isin(np.arange(model.nbody), him.body_ids)
    fields = ("qpos", "qvel", "ctrl", "mocap_pos", "mocap_quat", "qacc_warmstart")
    states = {name: [] for name in fields}
    for seed in range(SEEDS):
        rng, data, taken = np.random.default_rng(seed), mujoco.MjData(model), 0
        mujoco.mj_resetDataKeyframe(model, data, arena.index.keyframes["stance"])
        data.qpos[:] = arena.guard_qpos
        toward = data.qpos[:2] - arena.anchor_pos[:2]
        data.mocap_pos[arena.anchor_mocap] = arena.anchor_pos + GUARD_PRESS_M * np.append(
            toward / np.linalg.norm(toward), 0.0
        )
        data.mocap_quat[arena.anchor_mocap] = arena.anchor_quat
        for step in range(1, 61):
            for fighter in (me, him):
                noise = rng.uniform(-GUARD_NOISE, GUARD_NOISE, fighter.actuator_ids.size)
                data.ctrl[fighter.actuator_ids] = fighter.stance_ctrl + noise
            mujoco.mj_step(model, data, nstep=env.substeps)
            mujoco.mj_forward(model, data)
            if step % 3 == 0 and _joining(model, data, ours, his) and taken < STATES_PER_SEED:
                taken += 1
                for name in fields:
                    states[name].append(getattr(data, name).copy())
    return {name: np.stack(values) for name, values in states.items()}


def _steps(config: physics.PhysicsConfig, model: mujoco.MjModel, states: dict) -> dict[str, np.ndarray]:
    """`STEPS` physics steps of every state as one world each, with `config`'s physics: {"qpos" (T, K,
    nq), "qvel" (T, K, nv), "contacts" (T, K, 3) keys of each world's set of contacts (their geom pairs),
    "factorizations": our kernel's world factorisations}."""
    backend = physics.MjxBackend(config)
    mx, d0 = backend.put_model(model), backend.make_data(model)
    worlds, ngeom = len(states["qpos"]), model.ngeom
    start = jax.vmap(lambda *values: d0.replace(**dict(zip(states, values, strict=True))))(
        *(jnp.asarray(v, jnp.float32) for v in states.values())
    )

    def one(d, _):
        d = jax.vmap(lambda d: backend.step(mx, d, 1))(d)
        impl = d._impl
        live = jnp.arange(impl.contact__dist.shape[0]) < impl.nacon[0]
        pair = impl.contact__geom[:, 0] * ngeom + impl.contact__geom[:, 1] + 1
        terms = jnp.stack([jnp.ones_like(pair), pair, (pair % 1009) ** 2], axis=-1)  # count and two sums
        keys = jnp.zeros((worlds, 3), jnp.int32).at[impl.contact__worldid].add(terms * live[:, None])
        return d, (d.qpos, d.qvel, keys)

    before = factor_patch.factorizations()
    trace = jax.jit(lambda d: jax.lax.scan(one, d, None, length=STEPS)[1])(start)
    qpos, qvel, contacts = (np.asarray(x) for x in trace)
    return dict(
        qpos=qpos, qvel=qvel, contacts=contacts, factorizations=factor_patch.factorizations() - before
    )


def _patches_off() -> None:
    """Both MuJoCo Warp patches off, as in a fresh process."""
    factor_patch.install(False)
    passive_patch.install(False)


def test_two_fighter_steps_with_our_factorisation_match_mujoco_warps():
    """The block world's default physics (our kernel on both trees) against MuJoCo Warp's own
    factorisation, 5 physics steps from 16 states whose contacts join the two fighters: joint angles and
    velocities within the module's tolerances at the first step and at every step, every world compared
    after the first step and `MIN_COMPARED` of them through the fifth; our kernel ran for every world at
    every step of the default run and never in the other."""
    env = envs.make("block", body="muscular", impl="warp", num_worlds=SEEDS * STATES_PER_SEED)
    model, config = env.mj_model, env.backend.config
    assert physics.factor_trees(model, config) == "all"
    states = _pressed_guard_states(env)
    assert len(states["qpos"]) == SEEDS * STATES_PER_SEED
    _patches_off()
    try:
        ours = _steps(config, model, states)
        stock = _steps(dataclasses.replace(config, fused_factor=False), model, states)
    finally:
        _patches_off()
    assert ours["factorizations"] >= STEPS * len(states["qpos"]) and stock["factorizations"] == 0
    hinge = [model.jnt_qposadr[j] for j in range(model.njnt) if model.jnt_type[j] in (2, 3)]
    angle = np.abs(ours["qpos"] - stock["qpos"])[..., hinge].max(axis=-1)
    speed = np.abs(ours["qvel"] - stock["qvel"]).max(axis=-1)
    alike = np.logical_and.accumulate((ours["contacts"] == stock["contacts"]).all(axis=-1), axis=0)
    print(
        f"first step {angle[0].max():.3g} rad, {speed[0].max():.3g} rad/s; every step "
        f"{angle[alike].max():.3g} rad, {speed[alike].max():.3g} rad/s; {alike[-1].sum()} worlds compared "
        f"through step {STEPS}"
    )
    assert np.isfinite(ours["qpos"]).all() and alike[0].all()
    assert alike[-1].mean() >= MIN_COMPARED
    assert angle[0].max() <= FIRST_STEP_TOL_RAD and speed[0].max() <= FIRST_STEP_TOL_RAD_PER_S
    assert angle[alike].max() <= STEPS_TOL_RAD and speed[alike].max() <= STEPS_TOL_RAD_PER_S


@pytest.fixture
def patches_restored(monkeypatch) -> None:
    """Every attribute the two patches set, and their own records, restored after the test."""
    import importlib

    for module_name, attribute in (
        (factor_patch.MJWARP_PACKAGE, "put_model"),
        (factor_patch._SMOOTH, "factor_solve_i"),
        (passive_patch._PASSIVE, "passive"),
    ):
        module = importlib.import_module(module_name)
        monkeypatch.setattr(module, attribute, getattr(module, attribute))
    for module, record in (
        (factor_patch, "_ORIGINAL"),
        (passive_patch, "_ORIGINAL"),
        (put_hooks, "_HOOKS"),
        (put_hooks, "_WRAPPED"),
    ):
        monkeypatch.setattr(module, record, dict(getattr(module, record)))


def test_a_model_with_our_factorisation_after_one_without_can_be_put(patches_restored):
    """One process puts the simple body on MuJoCo Warp (its own factorisation), then the muscular one (ours):
    the second `physics.put_model` installs our factorisation's patch after the gravity-compensation one
    and then that one again: patches that each keep the `put_model` they find as MuJoCo Warp's own take each
    other's wrapper for it there and call each other without end (RecursionError)."""
    from boxjax import mjcf

    _patches_off()
    physics.put_model(mjcf.build("simple")[0], physics.PhysicsConfig(impl="warp"))
    physics.put_model(mjcf.build("muscular")[0], physics.PhysicsConfig(impl="warp"))
    assert factor_patch.installed() and passive_patch.installed()


PATCH_STEPS = (
    ("passive", True),
    ("factor", True),
    ("passive", True),
    ("factor", False),
    ("factor", True),
    ("passive", False),
    ("passive", True),
    ("factor", True),
    ("passive", False),
    ("factor", False),
    ("factor", True),
    ("passive", True),
    ("factor", False),
    ("passive", False),
)
"""Installs and uninstalls of the two patches: each order, each one alone, again and again."""


def test_patches_compose_in_any_order(patches_restored, monkeypatch):
    """After every step of `PATCH_STEPS`, MuJoCo Warp's `put_model` (a stand-in here) runs once per call
    and each installed patch registers the model once, the others not at all; with both off, the package
    holds the function it had before. Wrappers that each keep what they find as the original recurse from
    the third step on."""
    import importlib

    package = importlib.import_module(factor_patch.MJWARP_PACKAGE)
    _patches_off()
    calls = []

    def stock(mjm, *args, **kwargs):
        calls.append("put_model")
        return mjm

    monkeypatch.setattr(package, "put_model", stock)
    monkeypatch.setattr(factor_patch, "register", lambda mjm: calls.append("factor"))
    monkeypatch.setattr(passive_patch, "register", lambda mjm: calls.append("passive"))
    patches = {"factor": factor_patch, "passive": passive_patch}
    model = object()
    for name, enabled in PATCH_STEPS:
        patches[name].install(enabled)
        calls.clear()
        assert package.put_model(model) is model, (name, enabled)
        on = sorted(n for n, patch in patches.items() if patch.installed())
        assert sorted(calls[:-1]) == on and calls[-1] == "put_model", (name, enabled, calls)
    assert package.put_model is stock and not put_hooks.hooks()
