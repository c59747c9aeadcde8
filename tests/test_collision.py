"""Convex collision as built (`boxer.CCD_ITERATIONS`) finds the contacts MuJoCo's default cap finds.

The muscular block world is stepped on MuJoCo's C engine; at its states the contacts are found once with the
model as built and once with MuJoCo's default cap of GJK/EPA iterations, by MuJoCo Warp's collision (the GPU
path's, here on Warp's CPU device) and by MuJoCo C's (the CPU path's). The contacts that involve a muscle
(an ellipsoid: the pairs that go through GJK/EPA) must agree: at a few states of random actions (mostly
fallen bodies) and at every state of punches landing on a fighter who holds his guard (the opponent's
glove on our chest, belly and shoulder muscles).
"""

import copy
import functools

import jax.numpy as jnp
import mujoco
import numpy as np

from boxjax.envs.block.config import KINDS
from boxjax.envs.block.env import BlockConfig
from boxjax.envs.cpu import CpuEnv
from boxjax.mjcf import boxer
from boxjax.physics import mjx as physics

WORLDS = 16
CHECK_STEPS = (25, 50, 75, 100, 125, 150)
"""Control steps at which the contacts are compared."""
MIN_COMPARED = 10
"""Muscle contacts both caps must find over all states (12 at these states): the check is not empty."""
MUJOCO_CCD_ITERATIONS = mujoco.MjOption().ccd_iterations
DIST_ATOL_M = 1e-5
NORMAL_ATOL_DEG = 1.0
GRAZING_M = 1e-5
"""A contact this close to touching may be found with one cap and not the other (GJK stops either side)."""
IMPACT_PUNCHES = (
    "jab-body-fast",
    "jab-body-medium",
    "jab-body-slow",
    "lead_hook-body-fast",
    "lead_uppercut-body-fast",
    "lead_hook-head-medium",
)
"""Punches of the library whose glove lands on a muscle of our fighter standing in his guard (pectorals,
abs, the front deltoid), one per world."""
IMPACT_STEPS = 20
"""Control steps from the guard: every punch above has landed and pulled back by then."""
MIN_IMPACT_COMPARED = 20
"""Glove-on-muscle contacts both caps must find over the impacts (36 at these punches and steps; with a
cap of 2 the first impact already differs by 1 mm, so the check has teeth)."""


def involves_muscle(mj_model, g1: int, g2: int) -> bool:
    """True for a geom pair one of which is an ellipsoid (a muscle)."""
    return mujoco.mjtGeom.mjGEOM_ELLIPSOID in (mj_model.geom_type[g1], mj_model.geom_type[g2])


def between_fighters(mj_model, g1: int, g2: int) -> bool:
    """True for a muscle of one fighter against a geom of the other (bodies named `red/...`, `blue/...`)."""
    teams = {mj_model.body(int(mj_model.geom_bodyid[g])).name.partition("/")[0] for g in (g1, g2)}
    return teams == {"red", "blue"} and involves_muscle(mj_model, g1, g2)


def _keep_contacts(mj_model, geoms, dists, normals, world: int, found: dict, keep) -> None:
    """Adds the contacts whose geom pair `keep(mj_model, g1, g2)` takes to `found[(world, geom1, geom2)]`:
    (distance m, normal)."""
    for (g1, g2), dist, normal in zip(geoms, dists, normals, strict=True):
        if keep(mj_model, g1, g2):
            found.setdefault((world, int(g1), int(g2)), []).append((float(dist), np.array(normal)))


def warp_contacts(mj_model, warp_model, worlds, keep=involves_muscle) -> dict:
    """The contacts `keep` takes (default: a muscle's) by MuJoCo Warp's collision at each world's state.

    Args:
      mj_model: the `mujoco.MjModel` the states belong to.
      warp_model: MuJoCo Warp's model of it (`put_model`), with the cap to test.
      worlds: K world states (`qpos` (K, nq), `qvel` (K, nv), `mocap_pos` (K, nmocap, 3), `mocap_quat`).
      keep: `keep(mj_model, geom1, geom2)` -> bool, the pairs compared.

    Returns:
      {(world, geom1, geom2): [(distance m, unit normal (3,)), ...]}.
    """
    import mujoco.mjx.third_party.mujoco_warp as mjw

    data = mujoco.MjData(mj_model)
    found = {}
    for world in range(len(worlds.qpos)):
        _set_state(data, worlds, world)
        mujoco.mj_kinematics(mj_model, data)
        warp_data = mjw.put_data(mj_model, data, nworld=1, naconmax=512, njmax=1024)
        mjw.kinematics(warp_model, warp_data)
        mjw.collision(warp_model, warp_data)
        count = int(warp_data.nacon.numpy()[0])
        contact = warp_data.contact
        normals = contact.frame.numpy()[:count, 0]
        geoms, dists = contact.geom.numpy()[:count], contact.dist.numpy()[:count]
        _keep_contacts(mj_model, geoms, dists, normals, world, found, keep)
    return found


def c_contacts(mj_model, worlds, keep=involves_muscle) -> dict:
    """The contacts `keep` takes by MuJoCo C's collision at each world's state, with `mj_model`'s cap (as
    `warp_contacts`)."""
    data = mujoco.MjData(mj_model)
    found = {}
    for world in range(len(worlds.qpos)):
        _set_state(data, worlds, world)
        mujoco.mj_forward(mj_model, data)
        contact = data.contact
        _keep_contacts(mj_model, contact.geom, contact.dist, contact.frame[:, :3], world, found, keep)
    return found


def _set_state(data, worlds, world: int) -> None:
    data.qpos[:], data.qvel[:] = worlds.qpos[world], worlds.qvel[world]
    data.mocap_pos[:], data.mocap_quat[:] = worlds.mocap_pos[world], worlds.mocap_quat[world]


def assert_same_contacts(want: dict, got: dict, where: str) -> int:
    """Asserts the contacts of two caps agree (the module's tolerances); returns how many were compared."""
    compared = 0
    for key in set(want) | set(got):
        ours, theirs = sorted(got.get(key, []), key=_dist), sorted(want.get(key, []), key=_dist)
        for dist, _ in ours[len(theirs) :] + theirs[len(ours) :]:
            assert abs(dist) <= GRAZING_M, f"{where}: contact {key} at {dist} m found by one cap only"
        for (dist_got, normal_got), (dist_want, normal_want) in zip(ours, theirs, strict=False):
            assert abs(dist_got - dist_want) <= DIST_ATOL_M, f"{where}: {key} {dist_got} m, not {dist_want} m"
            cos = np.clip(abs(normal_want @ normal_got), -1.0, 1.0)
            assert np.degrees(np.arccos(cos)) <= NORMAL_ATOL_DEG, f"{where}: {key} normal"
            compared += 1
    return compared


def _dist(contact) -> float:
    return contact[0]


def _with_default_cap(built):
    """(`built` with MuJoCo's default cap, MuJoCo Warp's model of `built`, of that copy) on Warp's CPU."""
    import mujoco.mjx.third_party.mujoco_warp as mjw

    assert built.opt.ccd_iterations == boxer.CCD_ITERATIONS < MUJOCO_CCD_ITERATIONS
    default = copy.deepcopy(built)  # not another env's model: envs of one config share theirs
    default.opt.ccd_iterations = MUJOCO_CCD_ITERATIONS
    warp_built, warp_default = mjw.put_model(built), mjw.put_model(default)
    assert warp_default.opt.ccd_iterations == MUJOCO_CCD_ITERATIONS != warp_built.opt.ccd_iterations
    return default, warp_built, warp_default


def test_capped_convex_collision_finds_the_default_contacts():
    import warp as wp

    env = CpuEnv(BlockConfig(body="muscular"), num_worlds=WORLDS)
    built = env.mj_model
    with wp.ScopedDevice("cpu"):
        default, warp_built, warp_default = _with_default_cap(built)
        env.reset()
        noise = np.random.default_rng(0)
        compared = {"warp": 0, "c": 0}
        for step in range(1, max(CHECK_STEPS) + 1):
            env.step(np.clip(noise.normal(0.0, 0.3, (WORLDS, env.action_size)), -1.0, 1.0))
            if step not in CHECK_STEPS:
                continue
            compared["warp"] += assert_same_contacts(
                warp_contacts(default, warp_default, env.worlds),
                warp_contacts(built, warp_built, env.worlds),
                f"MuJoCo Warp, step {step}",
            )
            compared["c"] += assert_same_contacts(
                c_contacts(default, env.worlds), c_contacts(built, env.worlds), f"MuJoCo C, step {step}"
            )
    assert min(compared.values()) >= MIN_COMPARED, compared


def test_capped_convex_collision_finds_the_default_contacts_where_punches_land():
    """The simulated opponent throws `IMPACT_PUNCHES` at our muscular fighter holding the guard (face
    episodes, zero actions); at every step the contacts of his geoms with our muscles agree between the
    caps."""
    import warp as wp

    face_only = (1.0,) + (0.0,) * (len(KINDS) - 1)
    env = CpuEnv(BlockConfig(body="muscular", kind_weights=face_only), num_worlds=len(IMPACT_PUNCHES))
    built, library = env.mj_model, env.task.library
    with wp.ScopedDevice("cpu"):
        default, warp_built, warp_default = _with_default_cap(built)
        env.reset()
        punch = np.array([library.names.index(name) for name in IMPACT_PUNCHES], np.int32)
        info = env.state.info.replace(punch=jnp.asarray(punch), frame=jnp.full(punch.shape, -1, jnp.int32))
        env.state = env.state.replace(info=info)
        compared = {"warp": 0, "c": 0}
        for step in range(1, IMPACT_STEPS + 1):
            env.step(np.zeros((env.num_worlds, env.action_size), np.float32))
            compared["warp"] += assert_same_contacts(
                warp_contacts(default, warp_default, env.worlds, between_fighters),
                warp_contacts(built, warp_built, env.worlds, between_fighters),
                f"MuJoCo Warp, step {step}",
            )
            compared["c"] += assert_same_contacts(
                c_contacts(default, env.worlds, between_fighters),
                c_contacts(built, env.worlds, between_fighters),
                f"MuJoCo C, step {step}",
            )
    assert min(compared.values()) >= MIN_IMPACT_COMPARED, compared


def _colliding(model, g1: int, g2: int) -> bool:
    ct, ca = model.geom_contype, model.geom_conaffinity
    return bool(ct[g1] & ca[g2] or ct[g2] & ca[g1])


def test_muscles_meet_only_the_opponents_gloves_of_his_side():
    """Our muscles touch the floor, each other and the opponent's gloves, never his bones or head nor the
    bag; every pair a punch lands or is stopped through stays (his gloves against our muscles, forearms,
    gloves and head); his bones still meet ours."""
    from boxjax.envs.block import punches
    from boxjax.mjcf import sparring

    lib = punches.load()
    world = sparring.build(
        "muscular", "simple", lib.distance_m, frozen_rad=punches.idle_hinges(lib, "simple")
    )
    model, red, blue = world.model, world.index.red, world.index.blue
    muscles = red.muscle_geom_ids
    his = [g for g in np.flatnonzero(np.isin(model.geom_bodyid, blue.body_ids)) if model.geom_contype[g]]
    gloves = set(blue.glove_geom_ids.tolist())
    assert len(muscles) == 63 and len(his) > len(gloves)
    for m in muscles:
        assert _colliding(model, m, world.index.floor_geom) and not _colliding(model, m, world.index.bag_geom)
        assert all(_colliding(model, m, g) == (g in gloves) for g in his)
    ours = [*muscles, *red.forearm_geom_ids, *red.glove_geom_ids, red.head_geom_id]
    assert all(_colliding(model, g, glove) for g in ours for glove in gloves)
    assert _colliding(model, red.forearm_geom_ids[0], blue.head_geom_id)
    assert _colliding(model, red.head_geom_id, blue.forearm_geom_ids[1])


@functools.cache
def _random_action_states() -> tuple:
    """(model, 30 states) of the muscular block world (the simulated opponent, his idle hinges frozen):
    every 10th of 300 control steps of random actions about our fighter's stance from the guard, each
    state an `mjSTATE_INTEGRATION` vector."""
    from boxjax.envs.block import punches
    from boxjax.mjcf import sparring

    lib = punches.load()
    world = sparring.build(
        "muscular", "simple", lib.distance_m, frozen_rad=punches.idle_hinges(lib, "simple")
    )
    model, me = world.model, world.index.red
    data, rng = mujoco.MjData(model), np.random.default_rng(0)
    mujoco.mj_resetDataKeyframe(model, data, world.index.keyframes["stance"])
    data.qpos[:] = world.guard_qpos
    data.mocap_pos[world.anchor_mocap], data.mocap_quat[world.anchor_mocap] = (
        world.anchor_pos,
        world.anchor_quat,
    )
    states = []
    for t in range(300):
        data.ctrl[me.actuator_ids] = me.stance_ctrl + rng.uniform(-0.4, 0.4, me.actuator_ids.size)
        mujoco.mj_step(model, data, nstep=5)
        if t % 10 == 9:
            state = np.empty(mujoco.mj_stateSize(model, STATE))
            mujoco.mj_getState(model, data, state, STATE)
            states.append(state)
    return model, states


STATE = mujoco.mjtState.mjSTATE_INTEGRATION


def test_the_solver_tolerance_as_built_steps_like_mujocos_default_in_float64():
    """`boxer.SOLVER_TOLERANCE` (1e-6) against MuJoCo's 1e-8 on MuJoCo C: from 30 states of the muscular
    block world under random actions, one control step each lands on the same state (measured at commit
    time: identical, as Newton converges past both tolerances in the same iterations; bound 1e-9 rad)."""
    model, states = _random_action_states()
    assert model.opt.tolerance == boxer.SOLVER_TOLERANCE == 1e-6
    data = mujoco.MjData(model)
    gaps, contacts = [], 0
    for state in states:
        after = []
        for tolerance in (boxer.SOLVER_TOLERANCE, 1e-8):
            model.opt.tolerance = tolerance
            mujoco.mj_setState(model, data, state, STATE)
            mujoco.mj_step(model, data, nstep=5)
            after.append(data.qpos.copy())
            contacts += data.ncon
        gaps.append(np.abs(after[0] - after[1]).max())
    model.opt.tolerance = boxer.SOLVER_TOLERANCE
    assert contacts > 0 and max(gaps) <= 1e-9, max(gaps)


LOOSE_TOLERANCE = 1e-3
"""A tolerance that does change the float32 step (the check's positive control)."""


def _warp_step(model, states, tolerance: float, nudge: bool = False) -> np.ndarray:
    """(K, nhinge) joint angles after one control step (5 physics steps) of MuJoCo Warp on Warp's CPU
    device, all K `states` at once as K worlds, at the solver `tolerance` (set on MuJoCo Warp's model after
    `put_model`, which raises it to at least 1e-6 where MJX's conversion, the training path's, keeps the
    model's); with `nudge`, from the states' qpos rounded one float32 ulp up."""
    import mujoco.mjx.third_party.mujoco_warp as mjw
    import warp as wp

    data = mujoco.MjData(model)
    fields = ("qpos", "qvel", "act", "ctrl", "mocap_pos", "mocap_quat", "qacc_warmstart")
    values = {name: [] for name in fields}
    for state in states:
        mujoco.mj_setState(model, data, state, STATE)
        for name in fields:
            values[name].append(getattr(data, name).astype(np.float32))
    if nudge:
        values["qpos"] = [np.nextafter(q, np.float32(np.inf)) for q in values["qpos"]]
    with wp.ScopedDevice("cpu"):
        warp_model = mjw.put_model(model)
        warp_model.opt.tolerance.fill_(tolerance)
        warp_model.opt.warn_overflow = 0
        warp_data = mjw.put_data(model, data, nworld=len(states), naconmax=256 * len(states), njmax=1024)
        for name in fields:
            getattr(warp_data, name).assign(np.stack(values[name]))
        for _ in range(5):
            mjw.step(warp_model, warp_data)
        overflow = sum(physics.OVERFLOW_BITS.values())  # not the solver's iteration cap
        assert not (warp_data.overflow.numpy() & overflow).any(), "contact or row slots overflowed"
        hinge = [model.jnt_qposadr[j] for j in range(model.njnt) if model.jnt_type[j] in (2, 3)]
        return warp_data.qpos.numpy()[:, hinge]


def test_the_solver_tolerance_as_built_steps_like_mujocos_default_in_float32_on_mujoco_warp():
    """The same 30 states and control step on MuJoCo Warp in float32 (Warp's CPU device, all states as
    worlds of one batch), at `boxer.SOLVER_TOLERANCE` and at MuJoCo's 1e-8: the two land no farther apart
    (joint angles) than float32 round-off in the state moves the step, i.e. than the step at 1e-6 from the
    states' qpos rounded one float32 ulp up lands from the step without (measured at commit time: the
    tolerances 0 rad apart, identical in every world, as in float32 the solver stops at the same iteration
    at both, mostly where its line search finds no step left; the round-off 2.1e-6 rad). The check can see
    a tolerance that matters: 1e-3 moves the step by more than the round-off (measured 3.0e-5 rad)."""
    model, states = _random_action_states()
    as_built = _warp_step(model, states, boxer.SOLVER_TOLERANCE)
    noise = float(np.abs(_warp_step(model, states, boxer.SOLVER_TOLERANCE, nudge=True) - as_built).max())
    gap = float(np.abs(_warp_step(model, states, 1e-8) - as_built).max())
    loose = float(np.abs(_warp_step(model, states, LOOSE_TOLERANCE) - as_built).max())
    print(f"float32: 1e-6 vs 1e-8 {gap:.3g} rad, round-off {noise:.3g} rad, 1e-3 vs 1e-6 {loose:.3g} rad")
    assert gap <= noise, (gap, noise)
    assert 0 < noise < loose, (noise, loose)
