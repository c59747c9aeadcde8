"""Bodies, arena, index and contact budget of `boxjax.mjcf` (CPU, MuJoCo C)."""

from __future__ import annotations

import functools

import mujoco
import numpy as np
import pytest
from mujoco import mjx

from boxjax import mjcf
from boxjax.mjcf import budget as budget_module
from boxjax.mjcf import collision, sparring
from boxjax.mjcf.indexing import KEYPOINTS

NV = {"muscular": 89, "muscular-fast": 89, "simple": 43}
ACTION_SIZE = {"muscular": 45, "muscular-fast": 45, "simple": 37}


@functools.cache
def arena(body: str, opponent: bool = False, bag: bool = False):
    return mjcf.build(body, opponent=opponent, bag=bag)


@pytest.mark.parametrize("body", mjcf.BODIES)
def test_sizes_and_single_tree(body):
    model, index = arena(body)
    assert model.nv == NV[body]
    assert model.nq == NV[body] + 1
    assert model.nu == NV[body] - 6
    assert model.ntree == 1
    assert np.all(model.body_rootid[index.red.body_ids] == index.red.pelvis_body)
    assert model.body_parentid[index.red.pelvis_body] == 0
    assert index.red.action_size == ACTION_SIZE[body]
    assert sorted(set(index.red.action_group.tolist())) == list(range(ACTION_SIZE[body]))
    # One actuator per hinge, named after it, targets within the joint range.
    joints = model.actuator_trnid[:, 0]
    assert [model.joint(j).name for j in joints] == [model.actuator(a).name for a in range(model.nu)]
    np.testing.assert_allclose(index.red.ctrl_range, model.jnt_range[joints], rtol=1e-6)
    assert np.all(model.jnt_limited[joints])


@pytest.mark.parametrize("body", mjcf.BODIES)
def test_mass_muscles_and_names(body):
    model, index = arena(body)
    mass = model.body_subtreemass[index.red.pelvis_body]
    assert 60.0 <= mass <= 100.0
    assert index.red.muscle_geom_ids.size == (0 if body == "simple" else 63)
    assert index.red.keypoint_site_ids.size == len(KEYPOINTS) >= 16
    assert len(set(index.red.keypoint_site_ids.tolist())) == len(KEYPOINTS)
    if body == "simple":
        allowed = {mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_SPHERE}
        fighter = np.isin(model.geom_bodyid, index.red.body_ids)
        assert set(model.geom_type[fighter].tolist()) <= {int(t) for t in allowed}


def test_fast_variant_matches_muscular_joints():
    heavy, _ = arena("muscular")
    fast, _ = arena("muscular-fast")
    assert (heavy.nq, heavy.nv, heavy.nu) == (fast.nq, fast.nv, fast.nu)
    assert [heavy.joint(j).name for j in range(heavy.njnt)] == [fast.joint(j).name for j in range(fast.njnt)]
    np.testing.assert_array_equal(heavy.actuator_gainprm, fast.actuator_gainprm)


def _stand(model, index, key: str, seconds: float = 5.0):
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, index.keyframes[key])
    mujoco.mj_forward(model, data)
    pelvis0 = data.xpos[index.red.pelvis_body, 2]
    feet = set(index.red.foot_body_ids.tolist())
    low_pelvis, low_head, intruders = np.inf, np.inf, set()
    for _ in range(int(seconds / model.opt.timestep)):
        mujoco.mj_step(model, data)
        low_pelvis = min(low_pelvis, data.xpos[index.red.pelvis_body, 2])
        low_head = min(low_head, data.geom_xpos[index.red.head_geom_id, 2])
        for c in data.contact[: data.ncon]:
            bodies = {int(model.geom_bodyid[c.geom1]), int(model.geom_bodyid[c.geom2])}
            if 0 in bodies:
                intruders |= bodies - feet - {0}
    return pelvis0, low_pelvis, low_head, intruders


@pytest.mark.parametrize("key", ["stand", "stance"])
@pytest.mark.parametrize("body", mjcf.BODIES)
def test_keyframe_stands_for_five_seconds(body, key):
    model, index = arena(body)
    pelvis0, low_pelvis, low_head, intruders = _stand(model, index, key)
    assert low_pelvis > 0.6 * pelvis0
    assert low_head > 1.2
    assert not intruders, [model.body(b).name for b in intruders]


@pytest.mark.parametrize("body", mjcf.BODIES)
def test_keyframe_ctrl_equals_joint_targets(body):
    model, index = arena(body)
    for key in ("stand", "stance"):
        k = index.keyframes[key]
        np.testing.assert_allclose(model.key_ctrl[k], model.key_qpos[k, index.red.act_qpos_adr])


@pytest.mark.parametrize("body", mjcf.BODIES)
def test_lying_on_the_floor_fits_the_budget(body):
    ncon, nefc = budget_module.lying_peak(body, seconds=2.0)
    assert ncon <= mjcf.CONTACT_BUDGET[body].ncon_per_world
    assert nefc <= mjcf.CONTACT_BUDGET[body].njmax


def test_arena_with_opponent_and_bag_resolves():
    model, index = arena("simple", opponent=True, bag=True)
    assert index.blue is not None and index.bag_body >= 0 and index.bag_geom >= 0
    assert set(index.keyframes) == {"stand", "stance"}
    assert index.red.nq == index.blue.nq == 44
    assert index.blue.qpos_adr == index.red.qpos_adr + index.red.nq
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, index.keyframes["stance"])
    mujoco.mj_forward(model, data)
    # The opponent stands about a metre in front of us and looks back at us.
    gap = data.xpos[index.blue.pelvis_body, 0] - data.xpos[index.red.pelvis_body, 0]
    assert 0.9 < gap < 1.3
    assert data.site_xmat[index.red.eyes_site].reshape(3, 3)[0, 0] > 0.9
    assert data.site_xmat[index.blue.eyes_site].reshape(3, 3)[0, 0] < -0.9
    np.testing.assert_array_equal(index.blue.touch_sensor_adr, index.red.touch_sensor_adr + 2)
    assert model.body_mocapid[model.body("target").id] == index.target_mocap >= 0


def test_fighters_collide_with_each_other_not_with_themselves():
    model, index = arena("simple", opponent=True)
    ct, ca = model.geom_contype, model.geom_conaffinity
    red, blue = index.red.glove_geom_ids[0], index.blue.head_geom_id
    assert ct[red] & ca[blue] or ct[blue] & ca[red]
    own = index.red.head_geom_id
    assert not (ct[red] & ca[own] or ct[own] & ca[red])


def _sparring_world(body: str, opponent_body: str, gap_m: float | None = None):
    """The block arena with the simulated opponent `gap_m` from ours (default: the library's distance),
    both in the guard, his root anchor on his pelvis."""
    world = sparring.build(body, opponent_body, 0.7 if gap_m is None else gap_m)
    data = mujoco.MjData(world.model)
    data.qpos[:] = world.guard_qpos
    data.mocap_pos[world.anchor_mocap], data.mocap_quat[world.anchor_mocap] = (
        world.anchor_pos,
        world.anchor_quat,
    )
    data.ctrl[:] = world.model.key_ctrl[world.index.keyframes["stance"]]
    mujoco.mj_forward(world.model, data)
    return world, data


def test_sparring_opponent_is_welded_off_the_floor_and_of_his_own_body():
    world, data = _sparring_world("muscular", "simple")
    model, blue = world.model, world.index.blue
    assert world.index.red.nv == 89 and blue.nv == 43 and model.neq == 1
    assert model.eq_type[0] == mujoco.mjtEq.mjEQ_WELD
    theirs = np.isin(model.geom_bodyid, blue.body_ids)
    assert theirs.sum() > 10 and not np.any(model.geom_conaffinity[theirs] & collision.FLOOR)
    floor = model.geom("floor").id
    start = data.xpos[blue.pelvis_body].copy()
    mujoco.mj_step(model, data, nstep=400)  # 2 s in the guard
    np.testing.assert_allclose(data.xpos[blue.pelvis_body], start, atol=2e-3)  # held up by the weld
    assert not any(
        floor in (c.geom1, c.geom2) and model.geom_bodyid[c.geom1 + c.geom2 - floor] in blue.body_ids
        for c in data.contact
    )
    # the anchor drags him along: 0.1 m to the side within half a second
    data.mocap_pos[world.anchor_mocap, 1] += 0.1
    mujoco.mj_step(model, data, nstep=100)
    assert abs(data.xpos[blue.pelvis_body, 1] - start[1] - 0.1) < 0.01


@pytest.mark.parametrize("body", ["simple", "muscular"])
def test_a_clinch_of_the_simulated_fighters_fits_the_budget(body):
    """Both fighters in the guard 0.45 m apart, ours pushed into him (300 N) for 2 s: every step's contacts
    and constraint rows fit the block world's budget (his weld included), and MuJoCo's C engine, which the
    CPU path steps, never ran out of arena for them (it would drop them with a warning and step on)."""
    world, data = _sparring_world(body, "simple", gap_m=0.45)
    slots = budget_module.world_budget(body, "simple")
    peak = np.zeros(2, int)
    for _ in range(400):
        data.xfrc_applied[world.index.red.pelvis_body, 0] = 300.0
        mujoco.mj_step(world.model, data)
        peak = np.maximum(peak, [data.ncon, data.nefc])
    assert peak[0] > 8, "the fighters never touched"
    assert peak[0] <= slots.ncon_per_world and peak[1] <= slots.njmax, (peak, slots)
    for warning in (mujoco.mjtWarning.mjWARN_CONTACTFULL, mujoco.mjtWarning.mjWARN_CNSTRFULL):
        assert data.warning[int(warning)].number == 0, warning


def test_unknown_body_names_the_choices():
    with pytest.raises(ValueError, match="muscular-fast"):
        mjcf.build("heavyweight")
    with pytest.raises(ValueError, match="simple"):
        mjcf.boxer_spec("nope")


def test_budget_accessor():
    for body in mjcf.BODIES:
        assert budget_module.budget(body, True).njmax >= budget_module.budget(body, False).njmax
        for rival in mjcf.BODIES:
            world = budget_module.world_budget(body, rival)
            assert world.njmax == budget_module.pair_budget(body, rival).njmax + budget_module.WELD_ROWS
    with pytest.raises(ValueError, match="unknown body 'giant'"):
        budget_module.world_budget("simple", "giant")


@pytest.mark.parametrize(
    "body, opponent", [("muscular", False), ("muscular-fast", False), ("simple", False), ("simple", True)]
)
def test_mjx_put_model(body, opponent):
    """MJX's JAX implementation takes every arena: the same sizes and options, the muscles as ellipsoids."""
    model, _ = arena(body, opponent=opponent, bag=opponent)
    m = mjx.put_model(model, impl="jax")
    assert (m.nq, m.nv, m.nu, m.ngeom, m.nbody) == (model.nq, model.nv, model.nu, model.ngeom, model.nbody)
    np.testing.assert_allclose(
        [m.opt.tolerance, m.opt.timestep], [model.opt.tolerance, model.opt.timestep], rtol=1e-6
    )
    np.testing.assert_array_equal(np.asarray(m.geom_type), model.geom_type)
