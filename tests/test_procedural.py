"""Procedural punches (`boxjax.envs.block.procedural`): the held-out windows, a punch's path through its
keyframes, the bank's blend against the inverse kinematics it stands for, sequences and feints on the punch
clock, the southpaw stance (the mirror, its punches, its draws), the shipped held-out sets, and a block world
throwing them on the CPU path (MuJoCo C)."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from boxjax import mjcf
from boxjax.envs.block import authoring as mp
from boxjax.envs.block import procedural, punches, stances
from boxjax.envs.block import punch as block_punch
from boxjax.envs.block.env import BlockConfig, BlockEnv
from boxjax.mjcf import mirror

DT_S = 0.025
WINDOWS = procedural.HELDOUT_WINDOWS


def in_windows(u: np.ndarray) -> np.ndarray:
    """Whether each value lies in a held-out window."""
    return np.any([(u >= a) & (u < b) for a, b in WINDOWS], axis=0)


def test_training_never_draws_inside_the_heldout_windows():
    v = jax.random.uniform(jax.random.PRNGKey(0), (20000,))
    train = np.asarray(procedural.from_unit(v, WINDOWS, inside=False))
    held = np.asarray(procedural.from_unit(v, WINDOWS, inside=True))
    assert not in_windows(train).any() and in_windows(held).all()
    assert train.min() >= 0.0 and train.max() <= 1.0
    # uniform over the pieces: [0, 0.2) holds 0.2 / 0.8 of the training draws (binomial sd 0.3 %)
    assert abs(np.mean(train < 0.2) - 0.25) < 0.015
    assert abs(np.mean(held < 0.5) - 0.5) < 0.015
    # by hand: the training pieces [0, .2), [.3, .7), [.8, 1] laid end to end span 0.8
    hand = procedural.from_unit(jnp.array([0.0, 0.125, 0.25, 0.3, 0.75, 0.8]), WINDOWS, inside=False)
    np.testing.assert_allclose(hand, [0.0, 0.1, 0.3, 0.34, 0.8, 0.84], atol=1e-6)


@pytest.fixture(scope="module")
def bank():
    return procedural.device_bank(procedural.load_bank())


def draws(n: int, key=0, heldout=False, southpaw_share=0.0):
    dist = procedural.Distribution(heldout=heldout, southpaw_share=southpaw_share)
    return jax.vmap(lambda k: procedural.sample_draw(dist, k))(jax.random.split(jax.random.PRNGKey(key), n))


def test_a_punch_runs_guard_chamber_impact_guard(bank):
    ranges = procedural.Ranges()
    drawn = draws(64)
    specs = jax.vmap(lambda d: procedural.spec_of(bank, ranges, d, DT_S))(drawn)
    at = jax.vmap(procedural.joints_at)
    times = specs.times_s
    np.testing.assert_allclose(at(specs, times[:, 0]), np.broadcast_to(bank.guard, (64, bank.guard.size)))
    np.testing.assert_allclose(at(specs, jnp.full(64, -0.1)), at(specs, times[:, 0]))
    np.testing.assert_allclose(at(specs, times[:, 2]), specs.keys[:, 2], atol=1e-6)
    np.testing.assert_allclose(at(specs, times[:, 4] + 0.2), specs.keys[:, 0], atol=1e-6)
    assert np.all((np.asarray(specs.length) - 1) * DT_S >= np.asarray(times[:, 4]) - 1e-6)
    np.testing.assert_allclose(specs.impact * DT_S, times[:, 2], atol=DT_S / 2 + 1e-6)
    straight = ~np.asarray(bank.chambered, bool)[np.asarray(drawn.kind)]
    assert np.all(np.asarray(times[straight, 1]) == 0.0) and np.all(np.asarray(times[~straight, 1]) > 0.0)
    extend = np.asarray(times[:, 2]) / np.where(straight, 1.0, ranges.curved_slower)
    expected = (extend >= ranges.speed_bands_s[0]).astype(int) + (extend >= ranges.speed_bands_s[1])
    np.testing.assert_array_equal(specs.speed, expected)
    lo, hi = sorted(ranges.extend_s)
    assert np.all((extend >= lo - 1e-6) & (extend <= hi + 1e-6))
    # a feint turns back part way: its deepest keyframe lies between the guard and the full impact
    feint = np.asarray(drawn.feint) > 0
    full = jax.vmap(lambda d: procedural.spec_of(bank, ranges, d, DT_S))(drawn.replace(feint=0 * drawn.feint))
    depth = np.linalg.norm(specs.keys[:, 2] - bank.guard, axis=1) / np.linalg.norm(
        full.keys[:, 2] - bank.guard, axis=1
    )
    assert (
        feint.any()
        and np.all((depth[feint] > 0.29) & (depth[feint] < 0.61))
        and np.allclose(depth[~feint], 1)
    )


def test_the_bank_blend_lands_where_the_inverse_kinematics_aims(bank):
    """Between the grid's aims the blended keyframe's glove lands within 1 cm (the IK's own tolerance) of
    where the IK solved for that very aim puts it (measured: at most 2.7 mm over 36 random aims)."""
    arena = mp.Arena("simple", procedural.load_bank().distance_m)
    rng = np.random.default_rng(1)
    azimuths, elevations = mp.AIM_OFFSETS_RAD["azimuth"], mp.AIM_OFFSETS_RAD["elevation"]
    for k, kind in enumerate(punches.KINDS):
        target = ("head", "body")[k % 2]
        ua, ue = rng.uniform(0, 1, 2)
        aim = (np.interp(ua, [0, 1], azimuths[::2]), np.interp(ue, [0, 1], elevations[::2]))
        exact, _ = mp.bank_keys(arena, kind, target, aim)
        g = punches.TARGETS.index(target)
        node = procedural.blend(bank.impact[k, g], jnp.array([1.0, 1.0, 1.0]))
        np.testing.assert_array_equal(node, bank.impact[k, g, 1, 1, 1])
        blended = np.asarray(procedural.blend(bank.impact[k, g], jnp.array([1.0, 2 * ua, 2 * ue])))
        hand = mp.STYLES[kind].hand
        miss = np.linalg.norm(
            mp.glove_path(arena, exact[None], hand) - mp.glove_path(arena, blended[None], hand)
        )
        assert miss < 0.01, (kind, aim, miss)


def run_clock(bank, table, steps: int, key=0):
    """One world's punch clock over `steps` steps: per-step (spec, draw, row, frame)."""
    clock = procedural.Clock(procedural.Distribution(heldout=table is not None), (12, 40), DT_S)

    def body(carry, k):
        out = clock.advance(bank, table, *carry, k)
        return out, out

    first = clock.start(bank, table, jax.random.PRNGKey(key))
    _, trace = jax.lax.scan(body, first, jax.random.split(jax.random.PRNGKey(key + 1), steps))
    return trace


def test_sequences_follow_at_once_and_keep_their_distance(bank):
    spec, draw, _, frame = run_clock(bank, None, 6000)
    starts = np.flatnonzero(np.asarray(frame[1:]) != np.asarray(frame[:-1]) + 1) + 1
    left_before = np.asarray(draw.combo_left)[starts - 1]
    chained, fresh = starts[left_before > 0], starts[left_before == 0]
    assert len(chained) > 20 and len(fresh) > 50
    assert np.all(np.asarray(frame)[chained] == 0) and np.all(np.asarray(frame)[fresh] <= -12)
    d = procedural.PARAMS.index("distance")
    np.testing.assert_array_equal(np.asarray(draw.u)[chained, d], np.asarray(draw.u)[chained - 1, d])
    np.testing.assert_array_equal(np.asarray(draw.combo_left)[chained], left_before[left_before > 0] - 1)
    # a sequence keeps its stance
    np.testing.assert_array_equal(np.asarray(draw.southpaw)[chained], np.asarray(draw.southpaw)[chained - 1])
    # the odds: a sequence of 1, 2, 3 punches 60/30/10 %, a feint 10 %, southpaw 30 % (a few hundred punches:
    # loose bounds)
    first_left = np.asarray(draw.combo_left)[fresh]
    assert 0.45 < np.mean(first_left == 0) < 0.75 and np.mean(first_left == 2) < 0.2
    assert 0.03 < np.mean(np.asarray(draw.feint)[starts]) < 0.2
    assert 0.15 < np.mean(np.asarray(draw.southpaw)[fresh]) < 0.45
    assert not in_windows(np.asarray(draw.u)[starts]).any()


def test_the_heldout_set_is_its_seed_and_its_chains_are_thrown_in_order(bank):
    table = procedural.load_table()
    with np.load(procedural.HELDOUT_PATH) as f:
        seed = int(f["seed"])
    again = procedural.heldout_table(procedural.Distribution(), seed, 5)
    rows = len(again["kind"])
    for name in ("kind", "target", "u", "feint", "combo_left"):
        np.testing.assert_array_equal(again[name], np.asarray(getattr(table, name))[:rows])
    assert in_windows(np.asarray(table.u)).all()
    _, draw, row, frame = run_clock(bank, table, 3000)
    row, frame = np.asarray(row), np.asarray(frame)
    starts = np.flatnonzero(frame[1:] != frame[:-1] + 1) + 1
    for s in starts:
        if int(np.asarray(table.combo_left)[row[s - 1]]) > 0:
            assert row[s] == row[s - 1] + 1 and frame[s] == 0
        else:
            assert row[s] in set(np.asarray(table.starts).tolist()) and frame[s] <= -12


def twin(name: str) -> str:
    """The other side's name (`shoulder_y_l` <-> `shoulder_y_r`); a midline name is its own."""
    side = {"_l": "_r", "_r": "_l"}.get(name[-2:])
    return name[:-2] + side if side else name


def mirrored(bank, joints) -> np.ndarray:
    """(..., J) bank joints mirrored as a southpaw punch mirrors them."""
    return np.asarray(bank.mirror_sign) * np.asarray(joints)[..., np.asarray(bank.mirror_of)]


def test_the_mirror_swaps_the_sides_and_negates_the_midline_turns():
    """Read from the joint axes: left and right swapped at the same angle, the spine's and neck's x and z
    hinges negated and their y hinges kept; twice is the identity, bit for bit; and on every body a pose
    mirrored puts each body where its twin's mirror image is."""
    names = procedural.load_bank().joint_names
    partner, sign = mirror.joint_mirror("simple", names)
    for i, name in enumerate(names):
        assert names[partner[i]] == twin(name)
        negated = twin(name) == name and name.split("_")[1] in ("x", "z")
        assert sign[i] == (-1.0 if negated else 1.0), name
    q = np.random.default_rng(0).uniform(-1, 1, (50, len(names))).astype(np.float32)
    np.testing.assert_array_equal(sign * (sign * q[:, partner])[:, partner], q)
    reflect = np.diag(mirror.REFLECT)
    for body in mjcf.BODIES:
        model = mjcf.boxer_spec(body).compile()
        hinges = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
        partner, sign = mirror.joint_mirror(body, [model.joint(j).name for j in hinges])
        lo, hi = model.jnt_range[hinges].T
        q = np.random.default_rng(1).uniform(lo, hi)
        pose, image = mujoco.MjData(model), mujoco.MjData(model)
        pose.qpos[model.jnt_qposadr[hinges]] = q
        image.qpos[model.jnt_qposadr[hinges]] = sign * q[partner]
        for data in (pose, image):
            mujoco.mj_kinematics(model, data)
        bodies = [model.body(b).name for b in range(model.nbody)]
        twins = [bodies.index(twin(b)) for b in bodies]
        np.testing.assert_allclose(image.xpos[twins] * mirror.REFLECT, pose.xpos, atol=1e-12, err_msg=body)
        frames = reflect @ image.xmat[twins].reshape(-1, 3, 3) @ reflect
        np.testing.assert_allclose(frames, pose.xmat.reshape(-1, 3, 3), atol=1e-12, err_msg=body)


def test_a_southpaw_punch_is_the_orthodox_one_mirrored(bank):
    """The same draw from the mirrored stance: the keyframes (guard included) mirrored, the other glove
    punching (a southpaw's jab is his right hand), the times as they were; the right arm follows the path
    the left arm followed, the hips turn the other way."""
    drawn = draws(64)
    spec = jax.vmap(lambda d: procedural.spec_of(bank, procedural.Ranges(), d, DT_S))
    ortho, south = spec(drawn), spec(drawn.replace(southpaw=jnp.ones_like(drawn.southpaw)))
    np.testing.assert_array_equal(south.keys, mirrored(bank, ortho.keys))
    np.testing.assert_array_equal(
        south.keys[:, 0], np.broadcast_to(mirrored(bank, bank.guard), (64, bank.guard.shape[0]))
    )
    np.testing.assert_array_equal(south.hand, 1 - np.asarray(ortho.hand))
    jab = np.asarray(drawn.kind) == punches.KINDS.index("jab")
    assert jab.any() and np.all(np.asarray(south.hand)[jab] == punches.HANDS.index("r"))
    for name in ("times_s", "length", "impact", "target", "kind", "speed", "distance_offset_m"):
        np.testing.assert_array_equal(getattr(south, name), getattr(ortho, name))
    names = procedural.load_bank().joint_names
    at = jax.vmap(procedural.joints_at)
    for t in np.linspace(0.0, 0.6, 7):
        o, s = np.asarray(at(ortho, jnp.full(64, t))), np.asarray(at(south, jnp.full(64, t)))
        for left in ("shoulder_y_l", "shoulder_x_l", "shoulder_z_l", "elbow_l"):
            np.testing.assert_array_equal(s[:, names.index(twin(left))], o[:, names.index(left)])
        np.testing.assert_array_equal(s[:, names.index("lumbar_z")], -o[:, names.index("lumbar_z")])


def test_a_southpaw_punch_lands_as_the_orthodox_one_does_mirrored(bank):
    """The opponent mirrored as the env mirrors him (`stances`: his hinges and his root about the
    fighters' centre line) throwing the bank's southpaw keyframes: his right glove is exactly where the
    orthodox punch's left glove is mirrored, so on our fighter within 3 mm of the mirrored aim on the head
    and 2 cm on the chest, whose centre stands 9 mm off the line (our fighter's hips are turned)."""
    host = procedural.load_bank()
    arena = mp.Arena("simple", host.distance_m)
    model = arena.model
    hinges = [
        model.joint(j).name.removeprefix("blue/")
        for j in range(model.njnt)
        if model.joint(j).name.startswith("blue/") and model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE
    ]
    qadr, cols = [arena.qadr(n) for n in hinges], [arena.qadr(n) for n in host.joint_names]
    root = arena.qadr("root")
    guard = arena.guard
    both = stances.stances("simple", hinges, guard[qadr], guard[root : root + 3], guard[root + 3 : root + 7])
    south = guard.copy()
    south[qadr] = both.ctrl[1]
    south[root : root + 3], south[root + 3 : root + 7] = both.root_pos[1], both.root_quat[1]
    for k, kind in enumerate(punches.KINDS):
        for g, target in enumerate(punches.TARGETS):
            hand = "lr"[host.arrays["hand"][k]]
            qpos = guard.copy()
            qpos[cols] = bank.impact[k, g, 1, 1, 1]
            arena.forward(qpos)
            landed = arena.glove(hand)
            qpos = south.copy()
            qpos[cols] = mirrored(bank, bank.impact[k, g, 1, 1, 1])
            arena.forward(qpos)
            southpaw = arena.glove("r" if hand == "l" else "l")
            np.testing.assert_allclose(southpaw, landed * mirror.REFLECT, atol=1e-5)
            gid = arena.red.head_geom_id if target == "head" else model.geom("red/chest").id
            centre = arena.data.geom_xpos[gid]
            aimed = centre + (landed - centre) * mirror.REFLECT
            assert np.linalg.norm(southpaw - aimed) < (0.003 if target == "head" else 0.02), (kind, target)


def test_without_southpaws_the_draws_are_the_previous_ones(bank):
    """The stance has a key of its own: at southpaw_share 0 every draw is the one drawn before stances
    existed (the shipped held-out set, written then, comes back bit for bit), and another share changes
    the stance alone."""
    with np.load(procedural.HELDOUT_PATH) as f:
        shipped = {k: f[k] for k in f.files}
    assert "southpaw" not in shipped
    again = procedural.heldout_table(procedural.Distribution(southpaw_share=0.0), int(shipped["seed"]), 8)
    rows = len(again["kind"])
    for name in ("kind", "target", "u", "feint", "combo_left"):
        np.testing.assert_array_equal(again[name], shipped[name][:rows])
    assert not again["southpaw"].any()
    none, some, every = (draws(2000, key=5, southpaw_share=share) for share in (0.0, 0.3, 1.0))
    for name in ("kind", "target", "u", "feint", "combo_left"):
        np.testing.assert_array_equal(getattr(some, name), getattr(none, name))
        np.testing.assert_array_equal(getattr(every, name), getattr(none, name))
    assert not np.any(none.southpaw) and np.all(every.southpaw == 1)
    assert abs(np.mean(some.southpaw) - 0.3) < 0.035  # binomial sd 1 %
    specs = jax.vmap(lambda d: procedural.spec_of(bank, procedural.Ranges(), d, DT_S))(none)
    np.testing.assert_array_equal(specs.keys[:, 0], np.broadcast_to(bank.guard, (2000, bank.guard.shape[0])))
    np.testing.assert_array_equal(specs.hand, np.asarray(bank.hand)[np.asarray(none.kind)])


def test_the_southpaw_heldout_set_is_its_seed_and_held_out():
    """Every punch from the mirrored stance, every parameter inside the held-out windows (which training
    never draws from), its own seed; its first sequences drawn again from the seed are its rows."""
    table = procedural.load_table(procedural.HELDOUT_SOUTHPAW_PATH)
    with np.load(procedural.HELDOUT_SOUTHPAW_PATH) as f:
        seed = int(f["seed"])
    assert seed == mp.HELDOUT_SOUTHPAW_SEED and seed != mp.HELDOUT_SEED
    again = procedural.heldout_table(procedural.Distribution(southpaw_share=1.0), seed, 5)
    rows = len(again["kind"])
    for name in ("kind", "target", "u", "feint", "combo_left", "southpaw"):
        np.testing.assert_array_equal(again[name], np.asarray(getattr(table, name))[:rows])
    assert in_windows(np.asarray(table.u)).all() and np.all(np.asarray(table.southpaw) == 1)
    assert table.starts.shape[0] == mp.HELDOUT_SEQUENCES
    orthodox = {tuple(u) for u in np.asarray(procedural.load_table().u)}
    assert not orthodox & {tuple(u) for u in np.asarray(table.u)}


def test_a_feint_is_thrown_but_never_arrives():
    current = block_punch.CurrentPunch(*(jnp.int32(v) for v in (20, 8, 0, 0)), feint=jnp.float32(1.0))
    f32 = jnp.float32
    events = block_punch.punch_events(
        current, jnp.int32(8), f32(0.9), f32(1.0), f32(0.0), 0, 0.25, 0.75, False
    )
    assert float(events["punch/arrived"]) == 0.0 and float(events["punch/hit"]) == 0.0
    thrown = block_punch.punch_events(
        current, jnp.int32(0), f32(0.0), f32(0.0), f32(0.0), 0, 0.25, 0.75, False
    )
    assert float(thrown["punch/thrown"]) == 1.0


def test_procedural_punches_need_the_full_simulated_opponent():
    with pytest.raises(ValueError, match="simulated opponent"):
        BlockEnv(BlockConfig(body="simple", opponent="puppet", punch_source="procedural"))
    with pytest.raises(ValueError, match="opponent_freeze_idle"):
        BlockEnv(BlockConfig(body="simple", opponent_freeze_idle=True, punch_source="heldout"))


def turned_from_us(qpos: np.ndarray, task) -> np.ndarray:
    """(N,) how far the opponent's hips are turned from the line to our pelvis (rad, + to his left)."""
    me, him = qpos[:, task.me.qpos_adr :], qpos[:, task.opponent.qpos_adr :]
    w, x, y, z = him[:, 3:7].T
    heading = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    to_us = np.arctan2(me[:, 1] - him[:, 1], me[:, 0] - him[:, 0])
    return np.angle(np.exp(1j * (heading - to_us)))


@pytest.mark.parametrize("source", ["heldout", "heldout-southpaw"])
def test_a_world_throws_the_heldout_punches_on_the_cpu_path(source):
    """The opponent's PD targets each step are the punch's keyframe path at that step (face episodes),
    and the punch events of the step are those of the punch in the state; his hips turn his left side
    toward us in the orthodox stance, his right side in the southpaw one."""
    from boxjax.envs.cpu import CpuEnv

    config = BlockConfig(body="simple", punch_source=source, kind_weights=(1, 0, 0, 0, 0), episode_s=2.0)
    env = CpuEnv(config, num_worlds=2, seed=3)
    env.reset()
    task, thrown, arrived = env.task, 0.0, 0.0
    opp = np.asarray(task.opponent.actuator_ids)
    for _ in range(60):
        out = env.step(np.zeros((2, task.action_size), np.float32))
        info = env.state.info
        want = jax.vmap(task._spec_ctrl)(info.spec, jnp.maximum(info.frame, 0))
        live = np.asarray(info.step) > 0  # a world just restarted has not been driven yet
        np.testing.assert_allclose(env.worlds.ctrl[live][:, opp], np.asarray(want)[live], atol=1e-6)
        settled = np.asarray(info.step) >= 8  # his root weld has pulled him into the stance
        turn = turned_from_us(env.worlds.qpos[settled], task)
        assert np.all(turn > 0.15 if source == "heldout-southpaw" else turn < -0.15), turn
        thrown += float(out.metrics["punch/thrown"].sum())
        arrived += float(out.metrics["punch/arrived"].sum())
    assert thrown >= 2 and arrived >= 1
