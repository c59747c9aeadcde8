"""Block task on the CPU: punch library, occlusion, punch score, delay buffer, mixed episodes, arm fit,
env protocol, the training CLI (simple body, few worlds).

One reset, one step and one training iteration are compiled for the whole file (`jitted`, `iteration`);
the episode kinds are chosen through the params' weights, and the CLI tests train with that same iteration.
"""

import dataclasses
import functools
import json
import os
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from boxjax import envs, mjcf
from boxjax.cli import block as block_cli
from boxjax.envs.block import env as block
from boxjax.envs.block import from_stance, ik, punches, scoring, vision
from boxjax.envs.block import kinds as block_kinds
from boxjax.envs.block import punch as block_punch
from boxjax.envs.stance import shared as stance_math
from boxjax.envs.walk import env as walk
from boxjax.envs.walk import teacher
from boxjax.envs.wrappers import autoreset_step, batch_reset
from boxjax.models import checkpoint
from boxjax.rl import ppo, rollout
from boxjax.rl.losses import distill_loss
from boxjax.rl.rollout import RolloutState, world_keys
from boxjax.rl.train_step import init_train_state, make_train_iteration

WORLDS = 2
OPTIONS = {"episode_s": 1.0, "shove_at_s": (0.1, 0.1), "recover_s": 0.2, "press_interval_s": (0.2, 0.3)}
"""Short episodes; the shove and its recovery fit in a few steps, and a command's second press (8 to 12
steps after the reset) in the 16 steps of `_kinds`."""
CONFIG = ppo.PPOConfig(
    num_envs=WORLDS, unroll_length=4, minibatch_size=8, num_epochs=1, policy_hidden=(16,), value_hidden=(16,)
)
CLI_ARGS = [
    "--platform", "cpu", "--mode", "fused", "--envs", "2", "--unroll", "4", "--minibatch", "8",
    "--epochs", "1", "--ppo", "policy_hidden=16", "--ppo", "value_hidden=16", "--env", "episode_s=1.0",
    "--env", "shove_at_s=0.1,0.1", "--env", "recover_s=0.2", "--env", "press_interval_s=0.2,0.3",
    "--teacher", "none",
]  # fmt: skip
"""The CLI's spelling of `OPTIONS` and `CONFIG`."""
IK_TOL_M = 0.03
"""The command's fitted arms must put the gloves this close to their targets (as tests/test_ik.py)."""
WARP_TOL = 1e-2
"""Reward difference allowed between MuJoCo Warp and MJX-JAX over the first steps of the command, walk and
bag episodes (the command's arms swing from the guard to the fitted pose: 5.5e-3 seen)."""
# Our analytic segment tests run in float32 against MuJoCo's float64 rays: cases closer than this to
# grazing a blocker are skipped in the parity test.
GRAZE_TOL_M = 1e-4


@functools.cache
def env():
    return envs.make("block", body="simple", impl="jax", num_worlds=WORLDS, **OPTIONS)


@functools.cache
def params():
    return env().default_params()


@functools.cache
def puppet_env():
    """The block world with the puppet opponent (geometry tests pose him by his mocap bodies)."""
    return envs.make("block", body="simple", impl="jax", num_worlds=WORLDS, opponent="puppet", **OPTIONS)


def only(kind: str, p=None):
    """Params whose episodes are all of `kind`."""
    weights = np.eye(len(block.KINDS), dtype=np.float32)[block.KINDS.index(kind)]
    return (p or params()).replace(kind_weights=jnp.asarray(weights))


@functools.cache
def jitted():
    e = env()
    reset = jax.jit(lambda p, keys: batch_reset(e, p, keys))
    step = jax.jit(lambda p, s, f, a: autoreset_step(e, p, s, f, a))
    see = jax.jit(jax.vmap(lambda d: vision.see(d, e.vision_index)))
    return reset, step, see


def _kinematics(qpos: np.ndarray, impact_of: str | None = None) -> mujoco.MjData:
    """Kinematics of the arena at `qpos` (both fighters), the opponent in the guard or, with `impact_of`,
    his joints at the library's angles of that punch's impact frame (clipped to their ranges)."""
    e = env()
    model = e.mj_model
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    data.mocap_pos[:], data.mocap_quat[:] = e.guard_mocap_pos, e.guard_mocap_quat
    if impact_of is not None:
        p = e.library.names.index(impact_of)
        moving = [j for j, n in enumerate(e.library.joint_names) if n not in e.opponent_frozen]
        joints = [model.joint("blue/" + e.library.joint_names[j]).id for j in moving]
        angles = e.library.qpos[p, e.library.impact[p], moving]
        data.qpos[model.jnt_qposadr[joints]] = np.clip(angles, *model.jnt_range[joints].T)
    mujoco.mj_kinematics(model, data)
    return data


# -- punch library ------------------------------------------------------------------------------------


def test_punch_library_round_trip_and_contents(tmp_path):
    lib = punches.load(body="simple")
    assert lib.size == len(punches.KINDS) * len(punches.TARGETS) * 3
    assert set(lib.kind) == set(punches.KINDS) and set(lib.hand) == {"l", "r"}
    assert set(lib.target) == set(punches.TARGETS) and len(set(lib.speed)) == 3
    assert np.all(lib.peak_speed_mps > 2.0) and np.all(lib.peak_speed_mps < 15.0)
    path = str(tmp_path / "copy.npz")
    punches.save(path, lib)
    again = punches.load(path)
    for f in dataclasses.fields(lib):
        np.testing.assert_array_equal(np.asarray(getattr(again, f.name)), np.asarray(getattr(lib, f.name)))
    # Every punch starts and ends with the opponent in the guard: the puppet's bodies, and the simulated
    # opponent's PD targets.
    e = puppet_env()
    table = punches.device_table(e.library, e.arena)
    guard = e.guard_mocap_pos[e.opponent.mocap_ids]
    pos, length = np.asarray(table.body_pos), np.asarray(table.length)
    np.testing.assert_allclose(pos[:, 0], np.broadcast_to(guard, pos[:, 0].shape), atol=1e-5)
    np.testing.assert_allclose(pos[np.arange(lib.size), length - 1], pos[:, 0], atol=1e-5)
    assert np.all(np.asarray(table.impact) < length)
    ctrl, stance = np.asarray(params().punches.ctrl), env().opponent.stance_ctrl
    np.testing.assert_allclose(ctrl[:, 0], np.broadcast_to(stance, ctrl[:, 0].shape), atol=1e-5)
    np.testing.assert_allclose(ctrl[np.arange(lib.size), length - 1], ctrl[:, 0], atol=1e-5)


def test_simulated_opponents_targets_are_the_librarys_angles_clipped_to_his_ranges():
    e, ctrl = env(), np.asarray(params().punches.ctrl)
    names = [e.mj_model.actuator(int(a)).name for a in e.opponent.actuator_ids]
    moving = [j for j, n in enumerate(e.library.joint_names) if "blue/" + n in names]
    assert all(n in e.opponent_frozen for j, n in enumerate(e.library.joint_names) if j not in moving)
    cols = [names.index("blue/" + e.library.joint_names[j]) for j in moving]
    lo, hi = e.opponent.ctrl_range[cols].T
    np.testing.assert_allclose(ctrl[..., cols], np.clip(e.library.qpos[..., moving], lo, hi), atol=1e-6)
    others = np.setdiff1d(np.arange(len(names)), cols)
    np.testing.assert_array_equal(
        ctrl[..., others], np.broadcast_to(e.opponent.stance_ctrl[others], ctrl[..., others].shape)
    )
    assert np.any(ctrl[..., cols] != ctrl[:, :1, cols])  # the punches move his arms


def test_puppet_replays_the_articulated_opponents_forward_kinematics():
    """Posed from the table, the puppet's gloves, keypoints and bodies are where the articulated opponent's
    are with the library's joint angles (the pose the PD-driven opponent aims at)."""
    e = puppet_env()
    table = punches.device_table(e.library, e.arena)
    src, blue = e.arena.source_model, e.arena.source_index.blue
    adr = [src.jnt_qposadr[src.joint("blue/" + j).id] for j in e.library.joint_names]
    for name in ("jab-head-fast", "rear_hook-body-slow"):
        p = e.library.names.index(name)
        for t in (0, int(e.library.impact[p]), int(e.library.length[p]) // 3):
            articulated = mujoco.MjData(src)
            articulated.qpos[:] = e.arena.guard_qpos
            articulated.qpos[adr] = e.library.qpos[p, t]
            mujoco.mj_kinematics(src, articulated)
            posed = mujoco.MjData(e.mj_model)
            posed.mocap_pos[e.opponent.mocap_ids] = np.asarray(table.body_pos[p, t])
            posed.mocap_quat[e.opponent.mocap_ids] = np.asarray(table.body_quat[p, t])
            mujoco.mj_kinematics(e.mj_model, posed)
            np.testing.assert_allclose(
                posed.geom_xpos[e.opponent.glove_geom_ids],
                articulated.geom_xpos[blue.glove_geom_ids],
                atol=1e-5,
            )
            np.testing.assert_allclose(
                posed.site_xpos[e.opponent.keypoint_site_ids],
                articulated.site_xpos[blue.keypoint_site_ids],
                atol=1e-5,
            )
    # Only our fighter (and the bag's ball joint) is simulated.
    alone, _ = mjcf.build("simple", bag=True)
    assert e.mj_model.nv == alone.nv and e.mj_model.nu == alone.nu


def test_punch_library_errors_are_named(tmp_path):
    lib = punches.load()
    only_simple = str(tmp_path / "simple.npz")
    punches.save(only_simple, dataclasses.replace(lib, bodies=("simple",)))
    with pytest.raises(ValueError, match="not 'muscular'"):
        punches.load(only_simple, body="muscular")
    with pytest.raises(ValueError, match=r"qpos must be \(punches, frames, joints\)"):
        punches.save(str(tmp_path / "bad.npz"), dataclasses.replace(lib, qpos=lib.qpos[0]))
    with pytest.raises(ValueError, match="joints but joint_names"):
        punches.validate(dataclasses.replace(lib, joint_names=lib.joint_names[:-1]))
    with pytest.raises(ValueError, match="impact frames"):
        punches.validate(dataclasses.replace(lib, impact=lib.length.copy()))
    renamed = dataclasses.replace(lib, joint_names=(*lib.joint_names[:-1], "tail_wag"))
    with pytest.raises(ValueError, match="tail_wag"):
        punches.device_table(renamed, puppet_env().arena)
    with pytest.raises(ValueError, match="tail_wag"):
        punches.ctrl_table(renamed, env().mj_model, env().opponent, env().opponent_frozen)
    np.savez(str(tmp_path / "old.npz"), format_version=np.int32(0))
    with pytest.raises(ValueError, match="format 0"):
        punches.load(str(tmp_path / "old.npz"))


def test_resample_keeps_duration_and_impact_time():
    lib = punches.load()
    slow = punches.resample(lib, 40.0)
    np.testing.assert_allclose((slow.length - 1) / 40.0, (lib.length - 1) / lib.rate_hz, atol=1.0 / 40.0)
    np.testing.assert_allclose(slow.impact / 40.0, lib.impact / lib.rate_hz, atol=0.5 / 40.0)
    np.testing.assert_allclose(slow.qpos[:, 0], lib.qpos[:, 0])


def test_punch_clock_waits_throws_and_samples_the_next_punch():
    table = params().punches
    punch, frame = jnp.int32(0), jnp.int32(-2)
    frames = []
    for k in jax.random.split(jax.random.PRNGKey(0), int(table.length[0]) + 3):
        punch, frame = block_punch.advance_punch(table, punch, frame, k, (5, 5))
        frames.append(int(frame))
    length = int(table.length[0])
    assert frames[: length + 1] == list(range(-1, length))
    assert frames[length + 1] == -5  # the next punch waits out its gap


# -- occlusion ----------------------------------------------------------------------------------------


def _capsules(centres, radii, half=None, axis=(0.0, 0.0, 1.0)):
    centres = jnp.asarray(centres, jnp.float32)
    half = jnp.zeros(len(radii)) if half is None else jnp.asarray(half, jnp.float32)
    offset = half[:, None] * jnp.asarray(axis, jnp.float32)
    return vision.Capsules(
        start=centres - offset, end=centres + offset, radius=jnp.asarray(radii, jnp.float32)
    )


def test_segment_distance_matches_dense_sampling():
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 1.0, 401)
    for case in range(40):
        p0, p1, q0, q1 = rng.normal(size=(4, 3))
        if case % 4 == 0:
            q1 = q0  # a sphere
        if case % 4 == 1:
            q1 = q0 + 0.5 * (p1 - p0)  # parallel
        got = float(vision.segment_distance(*(jnp.asarray(v, jnp.float32) for v in (p0, p1, q0, q1))))
        a = p0 + t[:, None] * (p1 - p0)
        b = q0 + t[:, None] * (q1 - q0)
        want = np.min(np.linalg.norm(a[:, None] - b[None], axis=-1))
        assert got <= want + 1e-5 and got >= want - 5e-3, (case, got, want)


def test_hand_placed_occlusion():
    glove = _capsules([[0.5, 0.0, 0.0]], [0.1])
    eyes = jnp.zeros((6, 3))
    points = jnp.array(
        [
            [1.0, 0.0, 0.0],  # straight behind the glove: hidden
            [1.0, 0.5, 0.0],  # off to the side: seen
            [0.3, 0.0, 0.0],  # in front of the glove: seen
            [0.55, 0.0, 0.0],  # inside the glove: hidden
            [1.0, 0.19, 0.0],  # the line passes 0.095 from the centre: hidden
            [1.0, 0.21, 0.0],  # passes 0.104 from the centre: seen
        ]
    )
    hidden = np.asarray(vision.segments_blocked(eyes, points, glove))
    assert hidden.tolist() == [True, False, False, True, True, False]
    forearm = _capsules([[0.5, 0.0, 0.0]], [0.03], half=[0.2])  # vertical bar
    bar = np.asarray(vision.segments_blocked(eyes[:2], jnp.array([[1.0, 0, 0.35], [1.0, 0, 0.5]]), forearm))
    assert bar.tolist() == [True, False]  # ends of the bar at z = +-0.2 (+0.03 cap), halfway at 0.175


@functools.cache
def _jitted_vision():
    """(see, margins) jitted on plain arrays, for MuJoCo C data."""
    index = env().vision_index
    fields = ("site_xpos", "site_xmat", "xpos", "xmat", "geom_xpos", "geom_xmat")

    def see(arrays):
        return vision.see(SimpleNamespace(**arrays), index)

    def margins(arrays):
        d = SimpleNamespace(**arrays)
        points = vision.target_points(d.site_xpos, d.xpos, d.xmat, index)
        eyes = d.site_xpos[index.eyes_site]
        gloves = vision.pose_capsules(d.geom_xpos, d.geom_xmat, index.gloves)
        dist = jax.vmap(
            lambda p: jax.vmap(vision.segment_distance, in_axes=(None, None, 0, 0))(
                eyes, p, gloves.start, gloves.end
            )
        )(points)
        return points, jnp.min(jnp.abs(dist - gloves.radius), axis=1)

    def arrays(data):
        return {f: jnp.asarray(getattr(data, f), jnp.float32) for f in fields}

    return (lambda data: jax.jit(see)(arrays(data))), (lambda data: jax.jit(margins)(arrays(data)))


def _glove_only_ray_hidden(model, data, eyes, points, glove_ids):
    groups = model.geom_group.copy()
    model.geom_group[:] = 0
    model.geom_group[glove_ids] = 1
    try:
        mask = np.array([0, 1, 0, 0, 0, 0], np.uint8)
        out = []
        for p in points:
            vec = p - eyes
            length = np.linalg.norm(vec)
            dist = mujoco.mj_ray(model, data, eyes, vec / length, mask, 1, -1, np.zeros(1, np.int32))
            out.append(0.0 <= dist <= length)
        return np.array(out)
    finally:
        model.geom_group[:] = groups


def test_occlusion_matches_mj_ray_with_a_glove_only_group():
    e = env()
    model = e.mj_model
    rng = np.random.default_rng(1)
    me = e.me
    arms = [
        i
        for i, a in enumerate(me.actuator_ids)
        if model.actuator(a).name.split("/")[1][:5] in ("shoul", "elbow")
    ]
    see, margins = _jitted_vision()
    compared = hidden_total = 0
    for _ in range(40):
        qpos = e.guard_qpos.astype(np.float64).copy()
        lo, hi = me.ctrl_range[arms].T
        qpos[me.act_qpos_adr[arms]] += rng.uniform(-0.6, 0.6, len(arms))
        qpos[me.act_qpos_adr[arms]] = np.clip(qpos[me.act_qpos_adr[arms]], lo, hi)
        data = _kinematics(qpos)
        frame = np.asarray(see(data)).reshape(-1, 4)
        points, margin = (np.asarray(x, np.float64) for x in margins(data))
        eyes = data.site_xpos[me.eyes_site].copy()
        want = _glove_only_ray_hidden(model, data, eyes, points, me.glove_geom_ids)
        for p in range(len(points)):
            if margin[p] < GRAZE_TOL_M:
                continue
            compared += 1
            hidden_total += bool(want[p])
            assert (frame[p, 3] == 0.0) == want[p], f"point {p}: margin {margin[p]:.2e}"
            if frame[p, 3] == 0.0:
                assert np.all(frame[p, :3] == 0.0)
    assert compared > 1200 and hidden_total > 30


# -- punch score --------------------------------------------------------------------------------------

_HEAD = jnp.array([0.0, 0.0, 1.5])
_HEAD_R = jnp.float32(0.115)
_GLOVE = jnp.array([0.45, 0.0, 1.5])


def test_score_hand_placed_clean_full_and_partial():
    far = _capsules([[0.0, 2.0, 0.0]], [0.065])
    assert float(scoring.punch_score(_GLOVE, _HEAD, _HEAD_R, far)) == 1.0
    # Two forearms held upright side by side just in front of the incoming glove: full cover.
    shell = _capsules([[0.33, 0.035, 1.5], [0.33, -0.035, 1.5]], [0.038, 0.038], half=[0.11, 0.11])
    assert float(scoring.punch_score(_GLOVE, _HEAD, _HEAD_R, shell)) == 0.0
    half_shell = _capsules([[0.33, 0.035, 1.5]], [0.038], half=[0.11])
    partial = float(scoring.punch_score(_GLOVE, _HEAD, _HEAD_R, half_shell))
    assert 0.2 < partial < 0.8
    # A glove pressed against the incoming glove shadows the whole head.
    touching = _capsules([[0.32, 0.0, 1.5]], [0.065])
    assert float(scoring.punch_score(_GLOVE, _HEAD, _HEAD_R, touching)) == 0.0


def test_score_on_posed_fighters():
    e = env()
    model = e.mj_model
    # Arms hanging down: the opponent's jab at its impact frame lands clean.
    qpos = e.guard_qpos.astype(np.float64)
    for name in ("shoulder_y_l", "shoulder_y_r", "elbow_l", "elbow_r"):
        qpos[model.jnt_qposadr[model.joint("red/" + name).id]] = 0.0
    data = _kinematics(qpos, impact_of="jab-head-medium")
    score, gap = e._score(data, *e._punch_capsules(data), jnp.int32(0), jnp.int32(0))
    assert float(score) == 1.0 and float(gap) <= e.config.reach_m
    # Guard up, a glove coming in right behind our lead glove on the line to our head: full cover.
    data = _kinematics(e.guard_qpos.astype(np.float64))
    head = data.geom_xpos[e.me.head_geom_id]
    lead = data.geom_xpos[e.me.glove_geom_ids[0]]
    line = (lead - head) / np.linalg.norm(lead - head)
    blockers = vision.pose_capsules(data.geom_xpos, data.geom_xmat, e.blockers)
    behind = jnp.asarray(lead + 0.13 * line)
    assert float(scoring.punch_score(behind, jnp.asarray(head), _HEAD_R, blockers)) == 0.0
    side = np.cross(line, [0.0, 0.0, 1.0])
    side /= np.linalg.norm(side)
    grazing = jnp.asarray(lead + 0.13 * line + 0.07 * side)
    assert 0.0 < float(scoring.punch_score(grazing, jnp.asarray(head), _HEAD_R, blockers)) < 1.0


# -- delay buffer -------------------------------------------------------------------------------------


def test_delay_buffer_returns_the_frame_from_n_steps_ago():
    steps = 4
    frames = jnp.arange(1.0, 11.0)[:, None] * jnp.ones((1, 3))
    buffer, slot = vision.delay_init(jnp.zeros(3), steps), jnp.int32(0)
    out = []
    for f in frames:
        buffer, slot, delayed = vision.delay_push(buffer, slot, f, steps)
        out.append(float(delayed[0]))
    assert out == [0.0] * steps + list(range(1, 11 - steps))
    assert vision.delay_steps(0.1, 0.025) == 4
    _, _, now = vision.delay_push(buffer, slot, frames[0], 0)
    assert float(now[0]) == 1.0


# -- environment --------------------------------------------------------------------------------------


def _float64_leaves(tree):
    return [x for x in jax.tree.leaves(tree) if hasattr(x, "dtype") and x.dtype == np.float64]


def _run(actions, keys, force_punch=None, p=None):
    """Reset with `keys` (face episodes unless `p` says otherwise), optionally force every world to throw
    punch `force_punch` next, step."""
    reset, step, see = jitted()
    p = only("face") if p is None else p
    state = reset(p, keys)
    if force_punch is not None:
        # int32 (not weak-typed) and placed like the rest of the state, so the step compiles once
        place = state.info.punch.sharding
        punch = jax.device_put(jnp.full((WORLDS,), force_punch, jnp.int32), place)
        frame = jax.device_put(jnp.full((WORLDS,), -1, jnp.int32), place)
        state = state.replace(info=state.info.replace(punch=punch, frame=frame))
    first = state
    states, seen = [state], []
    for a in actions:
        state, stepped = step(p, state, first, a)
        states.append(stepped)
        seen.append(see(stepped.data))
    return states, seen


def _actions(steps: int):
    key = jax.random.PRNGKey(2)
    return 0.3 * jax.random.uniform(key, (steps, WORLDS, env().action_size), minval=-1, maxval=1)


@functools.cache
def _episode():
    actions, keys = _actions(24), jax.random.split(jax.random.PRNGKey(1), WORLDS)
    return _run(actions, keys, force_punch=env().library.names.index("jab-head-fast")), actions, keys


@functools.cache
def _kinds():
    """{kind: states of an episode of that kind in every world: the reset, then 16 stepped states}."""
    keys = jax.random.split(jax.random.PRNGKey(5), WORLDS)
    return {kind: _run(_actions(16), keys, p=only(kind))[0] for kind in block.KINDS}


def test_reset_step_shapes_finite_and_float32():
    (states, _), _, _ = _episode()
    e = env()
    for s in states:
        assert s.obs.shape == (WORLDS, e.observation_size) and s.obs.dtype == jnp.float32
        assert s.reward.dtype == jnp.float32
        assert bool(jnp.all(jnp.isfinite(s.obs))) and bool(jnp.all(jnp.isfinite(s.reward)))
        assert not _float64_leaves((s.obs, s.reward, s.done, s.truncation, s.metrics, s.info))
    assert set(states[0].metrics) == set(states[-1].metrics)
    assert tuple(sorted(states[-1].metrics)) == e.metric_names()
    want = {"punch/thrown", "punch/hit_score", "vision/hidden", "fall", "overflow/nefc", "kind/bag"}
    assert want | {f"success/{k}" for k in block.SUCCESS} <= set(states[-1].metrics)
    assert float(sum(s.metrics["nan"].sum() for s in states)) == 0.0


def test_every_kind_resets_and_steps_with_its_own_task_fields():
    e, sl = env(), env().obs_slices
    for index, (kind, states) in enumerate(_kinds().items()):
        assert np.all(np.asarray(states[0].info.kind) == index), kind
        for s in states:
            obs = np.asarray(s.obs)
            assert obs.shape == (WORLDS, e.observation_size) and np.all(np.isfinite(obs)), kind
            assert np.all(np.isfinite(np.asarray(s.reward))) and float(s.metrics["nan"].sum()) == 0.0
            assert not _float64_leaves((s.obs, s.reward, s.metrics, s.info))
            np.testing.assert_array_equal(obs[:, sl["kind"]], np.eye(len(block.KINDS))[[index] * WORLDS])
            for field in ("command", "walk", "bag"):  # each kind's own fields, zero elsewhere
                assert np.any(obs[:, sl[field]] != 0) == (kind == field), (kind, field)
            assert np.any(obs[:, sl["vision"]] != 0) == (kind == "face")
        assert set(states[0].metrics) == set(states[-1].metrics)
    shove = _kinds()["shove"]
    np.testing.assert_array_equal(sum(np.asarray(s.metrics["shove/shoved"]) for s in shove), 1.0)
    assert float(sum(s.metrics["success/recoveries"].sum() for s in shove)) <= WORLDS
    assert np.all(np.asarray(_kinds()["walk"][-1].metrics["walk/distance_m"]) > 0.0)
    reset, step, _ = jitted()
    assert reset._cache_size() == 1 and step._cache_size() == 1  # the kinds differ in params only


def test_kind_sampling_respects_the_weights():
    draw = jax.jit(jax.vmap(block_kinds.sample_kind, in_axes=(0, None)))
    keys = jax.random.split(jax.random.PRNGKey(0), 4000)
    for index in range(len(block.KINDS)):
        weights = jnp.asarray(np.eye(len(block.KINDS))[index], jnp.float32)
        assert set(np.asarray(draw(keys, weights)).tolist()) == {index}
    kinds = np.asarray(draw(keys, jnp.asarray([2.0, 0.0, 1.0, 1.0, 0.0], jnp.float32)))
    share = np.bincount(kinds, minlength=len(block.KINDS)) / kinds.size
    np.testing.assert_allclose(share, [0.5, 0.0, 0.25, 0.25, 0.0], atol=0.03)
    with pytest.raises(ValueError, match="kind_weights"):
        block.BlockConfig(kind_weights=(1.0, 0.0))


@functools.cache
def _gloves_and_targets():
    arm = env().arm_ik

    def one(qpos, angles, offset):
        placed = ik.glove_positions(arm, qpos.at[jnp.asarray(arm.qpos_adr)].set(angles))
        return placed, ik.guard_targets(arm, qpos, offset)

    return jax.jit(jax.vmap(one))


def _assert_in_guard_region(e, offsets: np.ndarray) -> None:
    """Every (2, 3) glove offset of `offsets` (..., 2, 3) lies in the box of the named poses' blends,
    widened by the jitter, and they are not all one named pose."""
    poses, widen = e.arm_ik.targets_m, e.config.command_jitter_m
    assert np.all(offsets >= poses.min(0) - widen - 1e-6) and np.all(offsets <= poses.max(0) + widen + 1e-6)
    gaps = np.abs(offsets.reshape(-1, 1, 2, 3) - poses[None]).max(axis=(-1, -2)).min(axis=-1)
    assert np.any(gaps > widen), "every target was a named pose plus jitter"


def test_command_arms_fitted_at_reset_reach_the_targets():
    e, state = env(), _kinds()["command"][0]
    info = state.info
    angles = info.pose_ref[:, e.arm_act]
    _assert_in_guard_region(e, np.asarray(info.command_offset))
    placed, targets = _gloves_and_targets()(state.data.qpos, angles, info.command_offset)
    miss = np.linalg.norm(np.asarray(placed - targets), axis=-1).max(axis=-1)
    assert np.all(miss < IK_TOL_M), miss
    np.testing.assert_allclose(miss, np.asarray(info.ik_residual), atol=1e-4)
    others = np.setdiff1d(np.arange(e.nu), e.arm_act)
    np.testing.assert_array_equal(
        np.asarray(info.pose_ref)[:, others], np.tile(e.me.stance_ctrl[others], (WORLDS, 1))
    )
    command = np.asarray(state.obs[:, e.obs_slices["command"]])
    np.testing.assert_array_equal(command[:, : block.NUM_POSES].argmax(-1), np.asarray(info.command))
    np.testing.assert_allclose(
        command[:, block.NUM_POSES : block.NUM_POSES + 6], info.command_offset.reshape(2, 6)
    )
    face = _kinds()["face"][0].info.pose_ref
    np.testing.assert_array_equal(np.asarray(face), np.broadcast_to(e.me.stance_ctrl, face.shape))


PRESS_SETTLE_STEPS = 4
"""Steps after a press by which the step's arm fit (one damped-least-squares step per control step) has
reached its targets: measured on 128 worlds, median residual 0.3 mm after 8 steps, 0.3 % above 5 cm."""


def test_presses_come_at_their_steps_and_the_arm_fit_follows_them():
    e, states = env(), _kinds()["command"]
    presses = np.stack([np.asarray(s.metrics["command/presses"]) for s in states[1:]])  # (16, W)
    due = np.asarray(states[0].info.next_press)
    assert np.all(presses.sum(axis=0) == 1), presses.sum(axis=0)
    np.testing.assert_array_equal(presses.argmax(axis=0) + 1, due)  # at the step drawn at reset
    offsets = np.stack([np.asarray(s.info.command_offset) for s in states])  # (17, W, 2, 3)
    worlds = np.arange(WORLDS)
    assert np.all(np.abs(offsets[due, worlds] - offsets[due - 1, worlds]).max(axis=(-1, -2)) > 1e-3)
    _assert_in_guard_region(e, offsets)
    last = states[-1].info
    settled = due + PRESS_SETTLE_STEPS <= len(states) - 1
    assert settled.sum() >= WORLDS // 2
    residual = np.asarray(last.ik_residual)[settled]
    assert np.all(residual < IK_TOL_M), residual
    # the residual is what the fitted angles really miss by, on MJX's kinematics of the whole arena
    data = states[-1].data
    angles = last.pose_ref[:, e.arm_act]
    placed = jax.vmap(lambda q, a: ik.glove_positions(e.arm_ik, q.at[jnp.asarray(e.arm_ik.qpos_adr)].set(a)))(
        data.qpos, angles
    )
    targets = jax.vmap(ik.targets_from_head)(
        data.xpos[:, e.arm_ik.head_body], data.xmat[:, e.arm_ik.pelvis_body], last.command_offset
    )
    miss = np.linalg.norm(np.asarray(placed - targets), axis=-1).max(axis=-1)
    assert np.all(miss[settled] < IK_TOL_M + 0.01), miss
    # pressing moved only the arms of the reference pose
    others = np.setdiff1d(np.arange(e.nu), e.arm_act)
    np.testing.assert_array_equal(
        np.asarray(last.pose_ref)[:, others], np.tile(e.me.stance_ctrl[others], (WORLDS, 1))
    )


def test_shipped_teacher_gives_the_leg_targets_and_zero_loss_when_the_policy_matches(monkeypatch, tmp_path):
    taught = envs.make("block", body="simple", impl="jax", num_worlds=WORLDS, teacher="shipped", **OPTIONS)
    assert rollout.has_distill_target(taught) and not rollout.has_distill_target(env())
    walking = _kinds()["walk"][4]
    targets = jax.jit(rollout.distill_targets, static_argnums=0)
    target, mask = targets(taught, taught.default_params(), walking)
    walker = teacher.load_teacher(teacher.shipped_teacher("simple"), "simple")
    command = jax.vmap(taught.teacher_command)(walking)
    obs = jax.vmap(walk.walk_observation, in_axes=(None, 0, 0))(taught.me, walking.data, command)
    np.testing.assert_allclose(target, teacher.teacher_action(walker, obs), atol=1e-5)
    np.testing.assert_array_equal(mask, np.broadcast_to(walker.leg_mask, mask.shape))
    assert float(jnp.max(jnp.abs(target * mask))) > 0.05  # the walker moves its legs toward the spot
    assert float(distill_loss(target, target, mask)) == 0.0
    assert float(distill_loss(jnp.zeros_like(target), target, mask)) > 0.0
    for body in mjcf.BODIES:  # every body ships its walker
        assert os.path.isfile(teacher.shipped_teacher(body)), body
    monkeypatch.setattr(teacher, "SHIPPED_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no walking teacher shipped for body 'muscular'"):
        envs.make("block", body="muscular", teacher="shipped")


def test_bag_episode_faces_the_bag_and_walk_teacher_points_to_the_spot():
    e = env()
    bag = _kinds()["bag"][0]
    root = np.asarray(bag.data.qpos[:, :7])
    reach = np.linalg.norm(root[:, :2] - e.bag_rest[:2], axis=-1)
    assert np.all((reach >= e.config.bag_distance_m[0] - 1e-5) & (reach <= e.config.bag_distance_m[1] + 1e-5))
    # the bag is straight ahead, where the opponent stands in face episodes
    seen = np.asarray(bag.obs[:, e.obs_slices["bag"]])
    np.testing.assert_allclose(np.arctan2(seen[:, 1], seen[:, 0]), 0.0, atol=1e-4)
    walk = _kinds()["walk"][0]
    command = np.asarray(jax.vmap(e.teacher_command)(walk))
    yaw = np.asarray(jax.vmap(e._facing)(walk.data.qpos[:, 3:7]))
    c, s = np.cos(yaw), np.sin(yaw)
    world = np.stack([c * command[:, 0] - s * command[:, 1], s * command[:, 0] + c * command[:, 1]], -1)
    toward = np.asarray(walk.info.spot - walk.data.qpos[:, :2]) / np.asarray(walk.info.spot_distance)[:, None]
    np.testing.assert_allclose(world / e.config.walk_speed_mps, toward, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(command[:, :2], axis=-1), e.config.walk_speed_mps, rtol=1e-5)
    assert np.all(command[:, 2] == 0.0)
    assert not np.any(np.asarray(jax.vmap(e.teacher_command)(_kinds()["face"][0])))


def test_bag_episode_pose_term_frees_the_arms():
    """In bag episodes the pose term weighs `pose_weight_bag` of a face episode's (the same state)."""
    e, cfg = env(), env().config
    one = jax.tree.map(lambda x: x[0], _kinds()["bag"][-1])
    touch, action = jnp.zeros((2,)), jnp.zeros((e.action_size,))
    bag_terms, _ = e._rewards(one.data, touch, action, one.info)
    face_terms, _ = e._rewards(one.data, touch, action, one.info.replace(kind=jnp.int32(block.FACE)))
    assert float(face_terms["pose"]) > 0.0
    assert float(bag_terms["pose"]) == pytest.approx(
        cfg.pose_weight_bag * float(face_terms["pose"]), rel=1e-6
    )


def test_bag_gap_and_direction_hand_placed():
    bag = _capsules([[0.0, 0.0, 0.5]], [0.17], half=[0.5])
    gloves = _capsules([[0.3, 0.0, 0.5], [0.0, 0.2, 1.2]], [0.065, 0.065])
    gap, toward = block_kinds.bag_gaps(gloves, bag)
    np.testing.assert_allclose(np.asarray(gap), [0.3 - 0.235, np.hypot(0.2, 0.2) - 0.235], atol=1e-6)
    half = np.sqrt(0.5)
    np.testing.assert_allclose(np.asarray(toward), [[-1.0, 0.0, 0.0], [0.0, -half, -half]], atol=1e-6)


def test_forced_punch_is_thrown_and_arrives_once():
    (states, _), _, _ = _episode()
    thrown = sum(np.asarray(s.metrics["punch/thrown"]) for s in states)
    arrived = sum(np.asarray(s.metrics["punch/arrived"]) for s in states)
    outcome = sum(
        np.asarray(s.metrics["punch/blocked"] + s.metrics["punch/missed"] + s.metrics["punch/hit"])
        for s in states
    )
    np.testing.assert_array_equal(thrown, 1.0)
    np.testing.assert_array_equal(arrived, 1.0)
    np.testing.assert_array_equal(outcome, 1.0)


BLOCKED_PUNCH = "cross-body-medium"
"""A punch the guard of the `stance` keyframe stops (its glove meets our forearm) and that lands clean on a
fighter with his arms down."""


def test_a_raised_guard_stops_the_punch_that_lands_with_the_arms_down():
    """The simulated opponent throws the same punch at two fighters standing still: the one in the guard
    stops it with his arms (the glove ends short of the target; blocked, parried), the one with his arms
    hanging takes it (a clean hit, scored)."""
    e, (reset, step, _) = env(), jitted()
    p = only("face")
    state = reset(p, jax.random.split(jax.random.PRNGKey(7), WORLDS))
    names = [e.mj_model.actuator(int(a)).name for a in e.me.actuator_ids]
    down = e.me.stance_ctrl.copy()
    for joint in ("shoulder_y", "shoulder_x", "elbow"):
        for side in "lr":
            down[names.index(f"red/{joint}_{side}")] = 0.0
    place = state.info.punch.sharding
    info = state.info.replace(
        pose_ref=jax.device_put(jnp.asarray(np.stack([e.me.stance_ctrl, down]), jnp.float32), place),
        punch=jax.device_put(jnp.full((WORLDS,), e.library.names.index(BLOCKED_PUNCH), jnp.int32), place),
        frame=jax.device_put(jnp.full((WORLDS,), -1, jnp.int32), place),
    )
    state = first = state.replace(info=info)
    events = {k: np.zeros(WORLDS) for k in ("punch/blocked", "punch/parried", "punch/hit", "punch/clean")}
    gap_at_arrival, score = np.full(WORLDS, np.nan), np.zeros(WORLDS)
    for _ in range(int(e.library.impact[e.library.names.index(BLOCKED_PUNCH)]) + e.lag_steps + 1):
        state, stepped = step(p, state, first, jnp.zeros((WORLDS, e.action_size)))
        arrived = np.asarray(stepped.metrics["punch/arrived"]) > 0
        gap_at_arrival[arrived] = np.asarray(stepped.info.punch_gap)[arrived]
        score += np.asarray(stepped.metrics["punch/hit_score"])
        for k in events:
            events[k] += np.asarray(stepped.metrics[k])
    np.testing.assert_array_equal(events["punch/blocked"], [1.0, 0.0])
    np.testing.assert_array_equal(events["punch/parried"], [1.0, 0.0])
    np.testing.assert_array_equal(events["punch/hit"], [0.0, 1.0])
    # closest approach of the glove to the target's surface: stopped 9 cm short by the guard, on the body
    # with the arms down (-3 mm, the contact's depth; seen at commit time), so 5 and 2 cm leave room
    assert gap_at_arrival[0] > 0.05 and gap_at_arrival[1] < 0.02, gap_at_arrival
    assert score[1] > e.config.block_max_score


def test_an_arrival_is_blocked_missed_or_hit():
    """At its arrival a punch judged on its closest approach is exactly one of: a hit (reached, scoring above
    `block_max_score`; clean from `clean_hit_score`), blocked (touched our guard or reached without
    scoring, parried when touched), missed (neither). Against the simulated opponent a touch that does not
    stop the glove leaves a hit a hit; the puppet's glove passes through, so there a touch blocks."""
    e, table = env(), params().punches
    arrival = int(table.impact[0]) + e.lag_steps

    def events_at(frame, score, reached, touched, touch_blocks):
        f32 = jnp.float32
        return block_punch.punch_events(
            block_punch.table_punch(table, 0), jnp.int32(frame), f32(score), f32(reached), f32(touched), e.lag_steps,
            e.config.block_max_score, e.config.clean_hit_score, touch_blocks,
        )  # fmt: skip

    names = ("punch/missed", "punch/blocked", "punch/parried", "punch/hit", "punch/clean", "punch/arrived")
    simulated = {
        (0.9, 0.0, 0.0): ("punch/missed",), (0.0, 0.0, 0.0): ("punch/missed",),
        (0.1, 1.0, 0.0): ("punch/blocked",), (0.9, 1.0, 0.0): ("punch/hit", "punch/clean"),
        (0.5, 1.0, 0.0): ("punch/hit",), (0.9, 1.0, 1.0): ("punch/hit", "punch/clean"),
        (0.1, 1.0, 1.0): ("punch/blocked", "punch/parried"),
        (0.9, 0.0, 1.0): ("punch/blocked", "punch/parried"),
    }  # fmt: skip
    puppet = {**simulated, (0.9, 1.0, 1.0): ("punch/blocked", "punch/parried")}
    for touch_blocks, cases in ((False, simulated), (True, puppet)):
        for (score, reached, touched), outcome in cases.items():
            events = events_at(arrival, score, reached, touched, touch_blocks)
            flags = {k: float(events[k]) for k in names}
            want = {k: float(k in outcome or k == "punch/arrived") for k in names}
            assert flags == want, (touch_blocks, score, reached, touched)
        before = events_at(arrival - 1, 0.9, 1.0, 1.0, touch_blocks)
        assert sum(float(before[k]) for k in names) == 0.0


def test_closest_approach_restarts_with_each_punch():
    gap, score = jnp.float32(block_punch.NO_GAP_M), jnp.float32(0.0)
    for frame, step_gap, step_score, want in (
        (-2, 0.0, 1.0, (block_punch.NO_GAP_M, 0.0)), (1, 0.3, 0.2, (0.3, 0.2)), (2, 0.05, 0.9, (0.05, 0.9)),
        (3, 0.2, 0.1, (0.05, 0.9)), (0, 0.01, 1.0, (block_punch.NO_GAP_M, 0.0)),
    ):  # fmt: skip
        gap, score = block_punch.closest_approach(
            jnp.int32(frame), jnp.float32(step_gap), jnp.float32(step_score), gap, score
        )
        np.testing.assert_allclose([float(gap), float(score)], want, rtol=1e-6)


def test_a_glove_sweeping_through_our_guard_touches_it():
    """The opponent's lead glove swept from his side of our lead glove to ours touches it; swept beside it
    (well clear) it does not."""
    e = env()
    data = _kinematics(e.guard_qpos.astype(np.float64))
    ours = data.geom_xpos[e.me.glove_geom_ids[0]]
    theirs = data.geom_xpos[e.opponent.glove_geom_ids[0]]
    line = (ours - theirs) / np.linalg.norm(ours - theirs)
    side = np.cross(line, [0.0, 0.0, 1.0])
    side /= np.linalg.norm(side)
    for offset, want in ((0.0, 1.0), (0.5, 0.0)):
        start, end = ours - 0.3 * line + offset * side, ours + 0.3 * line + offset * side
        moved = np.array(data.geom_xpos)
        moved[e.opponent.glove_geom_ids[0]] = end  # his glove now at the end of the sweep
        posed = SimpleNamespace(geom_xpos=jnp.asarray(moved), geom_xmat=jnp.asarray(data.geom_xmat))
        touched, glove = block_punch.guard_contact(
            *e._punch_capsules(posed), jnp.int32(0), jnp.asarray(start, jnp.float32), e.config.touch_margin_m
        )
        assert float(touched) == want, offset
        np.testing.assert_allclose(np.asarray(glove), end, atol=1e-5)


def test_follow_anchor_moves_at_most_its_step_and_turns_the_short_way():
    anchor = jnp.array([0.0, 0.0, 3.0])
    moved = block_punch.follow_anchor(anchor, jnp.array([0.3, 0.4, -3.0]), 0.1, 0.2)
    np.testing.assert_allclose(np.asarray(moved), [0.06, 0.08, 3.2], atol=1e-6)  # -3 rad is 0.28 rad ahead
    near = block_punch.follow_anchor(anchor, jnp.array([0.01, 0.0, 3.05]), 0.1, 0.2)
    np.testing.assert_allclose(np.asarray(near), [0.01, 0.0, 3.05], atol=1e-6)
    pinned = block_punch.follow_anchor(anchor, jnp.array([1.0, 1.0, 0.0]), 0.0, 0.0)
    np.testing.assert_array_equal(np.asarray(pinned), np.asarray(anchor))


def test_place_scene_moves_the_recording_rigidly():
    rng = np.random.default_rng(0)
    pos = jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)
    quat = jnp.asarray(rng.normal(size=(5, 4)), jnp.float32)
    quat = quat / jnp.linalg.norm(quat, axis=-1, keepdims=True)
    ref = jnp.array([0.2, -0.1])
    same_pos, same_quat = block_punch.place_scene(pos, quat, ref, jnp.array([0.2, -0.1, 0.0]))
    np.testing.assert_allclose(np.asarray(same_pos), np.asarray(pos), atol=1e-6)
    np.testing.assert_allclose(np.asarray(same_quat), np.asarray(quat), atol=1e-6)
    yaw = 0.7
    new_pos, new_quat = block_punch.place_scene(pos, quat, ref, jnp.array([1.0, 2.0, yaw]))
    mats = np.zeros((5, 9))
    for i in range(5):
        mujoco.mju_quat2Mat(mats[i], np.asarray(new_quat[i], np.float64))
        before = np.zeros(9)
        mujoco.mju_quat2Mat(before, np.asarray(quat[i], np.float64))
        turn = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
        np.testing.assert_allclose(mats[i].reshape(3, 3), turn @ before.reshape(3, 3), atol=1e-5)
        want = turn @ (np.asarray(pos[i]) - np.r_[np.asarray(ref), 0.0]) + np.r_[1.0, 2.0, 0.0]
        np.testing.assert_allclose(np.asarray(new_pos[i]), want, atol=1e-5)


def test_opponent_closes_in_on_a_fighter_who_stepped_back():
    """Our fighter moved 0.3 m away from the opponent at the start of a face episode: the opponent's
    anchor moves at most `opponent_follow_mps` while he waits, catches up, then puts the recording's head on
    ours (floor position, turned with our heading) after every step; his root anchor (and his welded pelvis)
    keeps its recorded distance to it. Once he throws, the anchor stays."""
    e, (reset, step, _) = env(), jitted()
    p = only("face")
    state = reset(p, jax.random.split(jax.random.PRNGKey(3), WORLDS))
    adr, root, head = e.me.qpos_adr, e.arena.anchor_mocap, e.me.head_geom_id
    ours, theirs = e.guard_qpos[adr : adr + 2], e.guard_mocap_pos[root, :2]
    away = (ours - theirs) / np.linalg.norm(ours - theirs)
    qpos = state.data.qpos.at[:, adr : adr + 2].add(jnp.asarray(0.3 * away, jnp.float32))
    waiting = jax.device_put(jnp.full((WORLDS,), -100, jnp.int32), state.info.frame.sharding)
    state = state.replace(data=state.data.replace(qpos=qpos), info=state.info.replace(frame=waiting))
    first, states = state, [state]
    for _ in range(20):
        state, stepped = step(p, state, first, jnp.zeros((WORLDS, e.action_size)))
        states.append(stepped)
    anchors = np.stack([np.asarray(s.info.opponent_anchor) for s in states])
    per_step = np.linalg.norm(np.diff(anchors[:, :, :2], axis=0), axis=-1)
    assert np.all(per_step <= e.config.opponent_follow_mps * e.config.control_dt_s + 1e-5)
    last = states[-1]
    c, s = np.cos(anchors[-1, :, 2]), np.sin(anchors[-1, :, 2])
    rel = e.scene_head
    placed_head = anchors[-1, :, :2] + np.stack([c * rel[0] - s * rel[1], s * rel[0] + c * rel[1]], -1)
    np.testing.assert_allclose(placed_head, np.asarray(last.data.geom_xpos[:, head, :2]), atol=1e-5)
    guard_head = ours + rel
    gap = np.linalg.norm(
        np.asarray(last.data.mocap_pos[:, root, :2]) - np.asarray(last.data.geom_xpos[:, head, :2]), axis=-1
    )
    np.testing.assert_allclose(gap, np.linalg.norm(guard_head - theirs), atol=0.02)
    pelvis = np.asarray(last.data.xpos[:, e.opponent.pelvis_body])
    np.testing.assert_allclose(pelvis, np.asarray(last.data.mocap_pos[:, root]), atol=0.02)
    assert float(sum(s.metrics["nan"].sum() for s in states)) == 0.0
    # a punch keeps its aim: moved back again as he throws, the anchor stays
    throwing = jax.device_put(jnp.full((WORLDS,), -1, jnp.int32), state.info.frame.sharding)
    qpos = state.data.qpos.at[:, adr : adr + 2].add(jnp.asarray(0.2 * away, jnp.float32))
    state = state.replace(data=state.data.replace(qpos=qpos), info=state.info.replace(frame=throwing))
    for _ in range(4):
        state, stepped = step(p, state, first, jnp.zeros((WORLDS, e.action_size)))
        np.testing.assert_array_equal(np.asarray(stepped.info.opponent_anchor), anchors[-1])


def test_observed_vision_is_the_frame_from_delay_steps_ago():
    (states, seen), _, _ = _episode()
    e = env()
    d = e.delay_steps
    assert d == 4
    obs_vision = [np.asarray(s.obs[:, e.obs_slices["vision"]]) for s in states[1:]]
    for t in range(d, len(seen)):
        np.testing.assert_array_equal(obs_vision[t], np.asarray(seen[t - d]))
    for t in range(d):
        np.testing.assert_array_equal(
            obs_vision[t], np.broadcast_to(params().guard_vision, obs_vision[t].shape)
        )


def test_same_key_same_trajectory():
    (states, _), actions, keys = _episode()
    again, _ = _run(actions[:6], keys, force_punch=env().library.names.index("jab-head-fast"))
    np.testing.assert_array_equal(np.asarray(again[-1].data.qpos), np.asarray(states[6].data.qpos))
    np.testing.assert_array_equal(np.asarray(again[-1].obs), np.asarray(states[6].obs))


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="unknown BlockConfig options"):
        envs.make("block", body="simple", punch_gaps=(1, 2))
    with pytest.raises(ValueError, match="punch_gap_s"):
        envs.make("block", body="simple", punch_gap_s=(1.0, 0.5))
    with pytest.raises(ValueError, match=r"BlockConfig.opponent_follow_mps must be in \[0, inf\), got -1.0"):
        envs.make("block", body="simple", opponent_follow_mps=-1.0)


def test_warp_on_cpu_matches_jax_through_a_punch_and_every_placement():
    """MuJoCo Warp (on Warp's CPU device) and MJX-JAX give the same rewards and punch events."""
    jab = env().library.names.index("jab-head-fast")
    keys = jax.random.split(jax.random.PRNGKey(3), WORLDS)
    zeros = jnp.zeros((16, WORLDS, env().action_size))  # judged at step 15: impact (7) + arrival lag (8)
    want, _ = _run(zeros, keys, force_punch=jab)
    warp = envs.make("block", body="simple", impl="warp", num_worlds=WORLDS, **OPTIONS)
    p = only("face", warp.default_params())

    def in_warp(state):
        """The same start in Warp's data layout (resetting again would compile the arm fit a second time)."""
        fresh = jax.vmap(lambda q: p.template.replace(qpos=q, qvel=jnp.zeros_like(p.template.qvel)))
        return state.replace(data=fresh(state.data.qpos))

    state = in_warp(want[0])
    step = jax.jit(lambda s, a: autoreset_step(warp, p, s, s, a)[1])
    for a, ref in zip(zeros, want[1:], strict=True):
        state = step(state, a)
        np.testing.assert_allclose(np.asarray(state.reward), np.asarray(ref.reward), atol=5e-3)
        np.testing.assert_array_equal(
            np.asarray(state.metrics["punch/arrived"]), np.asarray(ref.metrics["punch/arrived"])
        )
    assert float(sum(np.asarray(s.metrics["punch/arrived"]).sum() for s in want)) == WORLDS
    # the other placements (our fighter moved or posed by the arm fit, the opponent parked) step alike
    for kind in ("command", "walk", "bag"):
        states = _kinds()[kind]
        state = in_warp(states[0])
        for a, ref in zip(_actions(16)[:6], states[1:7], strict=True):
            state = step(state, a)
            np.testing.assert_allclose(
                np.asarray(state.reward), np.asarray(ref.reward), atol=WARP_TOL, err_msg=kind
            )


# -- training -----------------------------------------------------------------------------------------


@functools.cache
def iteration():
    return make_train_iteration(env(), CONFIG)


def _rollout(e, p, key, num_envs, reset_every=1, faces=False):
    """`ppo.fresh_rollout` through the file's compiled reset (jitting it anew would compile the reset, with
    the arm fit, for every training run); no reset pool, no self-play pool."""
    assert reset_every == 1 and not faces, "this stand-in builds no reset pool and no faces"
    zeros = jnp.zeros((num_envs,), jnp.float32)
    return RolloutState(
        env=jitted()[0](p, world_keys(key, num_envs)), episode_return=zeros, episode_length=zeros
    )


def test_trains_without_retrace():
    e = env()
    key = jax.random.PRNGKey(0)
    ts, rs = ppo.own_buffers((init_train_state(e, CONFIG, key), _rollout(e, params(), key, WORLDS)))
    for _ in range(2):
        ts, rs, metrics = iteration()(ts, rs, params())
    assert iteration()._cache_size() == 1
    figures = {k: float(v) for k, v in metrics.items()}
    assert all(np.isfinite(v) for v in figures.values())
    assert {"env/punch/hit_score", "env/success/goals", "env/kind/walk"} <= set(figures)
    assert int(ts.iteration) == 2


def test_stance_model_maps_onto_the_block_observation():
    """The mapped first layer on a block observation equals the stance one on the stance observation of
    the same body state at the guard (full amplitude, the clock at its mean)."""
    from boxjax.models.networks import Normalizer

    e, stance = env(), envs.make("stance", body="simple", impl="jax")
    rng = np.random.default_rng(0)
    size = stance.observation_size
    kernel, bias = rng.normal(size=(size, 16)).astype(np.float32), rng.normal(size=16).astype(np.float32)
    count = 1000.0
    stats = Normalizer(
        count=jnp.float32(count),
        mean=jnp.asarray(0.3 * rng.normal(size=size), jnp.float32),
        m2=jnp.asarray(count * rng.uniform(0.5, 2.0, size), jnp.float32),
    )
    new_kernel, new_bias, norm = from_stance.map_first_layer(kernel, bias, stats, e, prior_count=64.0)
    state = jax.tree.map(lambda x: x[0], _kinds()["face"][8])
    qpos, qvel, action = state.data.qpos, state.data.qvel, state.info.prev_action
    touch = jnp.asarray([300.0, 250.0], jnp.float32)
    info = state.info.replace(prev_action=action)
    block_obs = e._observe(qpos, qvel, touch, info, jnp.ones(vision.FRAME_SIZE), jnp.zeros(3))
    lay = stance.layout
    ref_height = jnp.float32(e.me.stance_qpos[2])
    guard = jnp.asarray(e.me.stance_ctrl)
    stance_obs = stance_math.observe(
        qpos[: stance.mj_model.nq], qvel[: stance.mj_model.nv], touch, guard, ref_height, 1.0, jnp.int32(0),
        action, lay,
    )  # fmt: skip
    clock = from_stance.stance_slices(e.nu, e.action_size)["clock"].start
    stance_obs = stance_obs.at[clock : clock + 2].set(stats.mean[clock : clock + 2])
    want = stats(stance_obs) @ kernel + bias
    got = norm(block_obs) @ new_kernel + new_bias
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-3)
    assert float(norm.count) == 64.0 and norm.mean.shape == (e.observation_size,)


def _stance_checkpoint(path) -> str:
    from boxjax.rl.rollout import init_rollout

    stance = envs.make("stance", body="simple", impl="jax")
    key = jax.random.PRNGKey(1)
    ts = init_train_state(stance, CONFIG, key)
    ts = ts.replace(normalizer=ts.normalizer.update(jax.random.normal(key, (64, stance.observation_size))))
    stance_params = stance.default_params()
    shapes = jax.eval_shape(lambda: init_rollout(stance, stance_params, key, CONFIG.num_envs))
    zeros = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes)
    checkpoint.save(str(path), 5, {"train": ts, "rollout": zeros}, ppo.run_meta(stance, CONFIG))
    return str(path)


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """`boxjax train --task block`'s `main` in tmp_path, training with the file's compiled iteration and reset
    (JAX already runs in this process, so the platform is not configured again)."""
    from boxjax import platform

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(platform, "configure", lambda *args, **kwargs: None)
    monkeypatch.setattr(ppo, "make_train_iteration", lambda env, config: iteration())
    monkeypatch.setattr(ppo, "fresh_rollout", _rollout)
    return lambda *args: block_cli.main([*CLI_ARGS, *args])


def _log(run) -> list[dict]:
    with open(run / "metrics.jsonl") as f:
        return [json.loads(line) for line in f]


def _same_figures(a: dict, b: dict) -> None:
    def timing(k: str) -> bool:
        return k in {"s_per_iteration", "steps_per_s", "time_s", "setup_s"} or k.startswith("setup/")

    assert {k: v for k, v in a.items() if not timing(k)} == {k: v for k, v in b.items() if not timing(k)}


def test_cli_starts_from_stance_trains_and_resumes_exactly(cli, tmp_path):
    stance = _stance_checkpoint(tmp_path / "stance")
    assert cli("--iterations", "3", "--name", "straight", "--init", stance) == 0
    assert cli("--iterations", "2", "--name", "split", "--init", stance, "--checkpoint-every", "1") == 0
    run = tmp_path / "runs" / "split"
    assert [f["iteration"] for f in _log(run)] == [1.0, 2.0]
    assert {"count/blocks", "count/goals", "count/bag_hits", "overflow", "env/success/recoveries"} <= set(
        _log(run)[0]
    )
    meta = checkpoint.read_meta(str(run / "checkpoints"))
    assert meta["config"] == env().config.to_dict() and meta["ppo"] == CONFIG.to_dict()
    assert checkpoint.read_meta(str(run / "init-from-stance"))["converted_from"]["task"] == "stance"
    assert cli("--iterations", "3", "--name", "split", "--resume", str(run / "checkpoints")) == 0
    assert [f["iteration"] for f in _log(run)] == [1.0, 2.0, 3.0]
    assert checkpoint.latest_step(str(run / "checkpoints")) == 3
    _same_figures(_log(run)[-1], _log(tmp_path / "runs" / "straight")[-1])
    assert iteration()._cache_size() == 1


def test_cli_refuses_other_bodies_and_observation_sizes(cli, tmp_path, capsys):
    def fake(name: str, **meta) -> str:
        path = str(tmp_path / name)
        base = {"ppo": CONFIG.to_dict(), "action_size": env().action_size, "body": "simple"}
        checkpoint.save(path, 1, {"train": {"x": np.zeros(1, np.float32)}}, {**base, **meta})
        return path

    size = env().observation_size
    cases = [
        (fake("muscular", env="stance", body="muscular"), "body: stance checkpoint has 'muscular'"),
        (fake("old", env="block", observation_size=size - 30), f"has {size - 30}, this run has {size}"),
        (fake("wide", env="block", observation_size=size, ppo={**CONFIG.to_dict(), "policy_hidden": [8]}),
         "ppo.policy_hidden"),
        (fake("toy", env="reach"), "'reach' checkpoint cannot start the block task"),
    ]  # fmt: skip
    for path, message in cases:
        with pytest.raises(ValueError, match=message):  # one `error: ...` line through `common.run_main`
            cli("--iterations", "1", "--name", "refused", "--init", path)
    with pytest.raises(ValueError, match="name the teacher once"):
        cli("--iterations", "1", "--name", "twice", "--env", "teacher=shipped")
    with pytest.raises(SystemExit):
        cli("--iterations", "1", "--name", "staged", "--graph-mode", "warp_staged_ex")
    assert "--graph-mode applies to --platform gpu only" in capsys.readouterr().err


def test_every_reward_term_is_weighted_once_by_its_config_field():
    """The block reward is a table: each of `REWARD_TERMS` comes unweighted from the step and is weighted by
    `BlockConfig.w_<term>` in one place (`weighted_terms`); `w_fall` is the fall's penalty."""
    from boxjax.envs.block.config import REWARD_TERMS, WEIGHTS, BlockConfig, weighted_terms

    config = BlockConfig(w_block=3.0)
    assert set(WEIGHTS) == {f"w_{term}" for term in REWARD_TERMS} | {"w_fall"}
    weighted = weighted_terms(config, {term: jnp.float32(2.0) for term in REWARD_TERMS})
    assert set(weighted) == set(REWARD_TERMS)
    for term in REWARD_TERMS:  # float32 products
        assert float(weighted[term]) == pytest.approx(2.0 * getattr(config, f"w_{term}"), rel=1e-6), term
    assert float(weighted["block"]) == 6.0


def test_a_parried_punch_earns_the_parry_bonus_and_no_hit_penalty():
    """`punch_terms`: a parried arrival (touched on the guard) counts as a block and a parry, its score no
    hit; a reached one scoring low a block only; a hit minus its score. `w_parry` 0 (the default) leaves the
    weighted sum as it was; `w_parry` 2 adds 2 per parry."""
    from boxjax.envs.block.config import BlockConfig, weighted_terms
    from boxjax.envs.block.env import punch_terms

    def events(arrived, blocked, parried):
        return {"punch/arrived": jnp.float32(arrived), "punch/blocked": jnp.float32(blocked),
                "punch/parried": jnp.float32(parried)}  # fmt: skip

    parried = punch_terms(events(1, 1, 1), jnp.float32(0.4))
    low = punch_terms(events(1, 1, 0), jnp.float32(0.1))
    hit = punch_terms(events(1, 0, 0), jnp.float32(0.7))
    assert {k: float(v) for k, v in parried.items()} == {"block": 1.0, "hit": 0.0, "parry": 1.0}
    assert {k: float(v) for k, v in low.items()} == pytest.approx({"block": 1.0, "hit": -0.1, "parry": 0.0})
    assert {k: float(v) for k, v in hit.items()} == pytest.approx({"block": 0.0, "hit": -0.7, "parry": 0.0})
    base = {"block": jnp.float32(1.0), "hit": jnp.float32(0.0)}
    rest = {t: jnp.float32(0.0) for t in ("alive", "pose", "height", "upright", "feet", "action_rate",
            "command", "walk_progress", "walk_goal", "bag_reach", "bag_hit", "recover")}  # fmt: skip
    plain = weighted_terms(BlockConfig(), {**rest, **base, "parry": jnp.float32(1.0)})
    bonus = weighted_terms(BlockConfig(w_parry=2.0), {**rest, **base, "parry": jnp.float32(1.0)})
    assert float(plain["parry"]) == 0.0 and float(bonus["parry"]) == 2.0
