"""Freezing hinges into the body tree (`boxjax.mjcf.freeze`) and the simulated opponent's idle hinges."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest

from boxjax.envs.block import punches
from boxjax.mjcf import boxer, freeze, sparring

# A first hinge of its body (lumbar_x), one after a kept hinge of the same body (forearm_l after elbow_l),
# a last one (shoulder_x_r between kept ones), and a chain of bodies (a leg).
FROZEN = {
    "lumbar_x": -0.2,
    "forearm_l": 0.7,
    "wrist_x_l": 0.3,
    "shoulder_x_r": 0.4,
    "hip_y_l": -0.5,
    "knee_l": 1.0,
}


def _copy_qpos(src: mujoco.MjModel, q: np.ndarray, dst: mujoco.MjModel) -> np.ndarray:
    """`q` of model `src` as the qpos of `dst`, joints matched by name."""
    out = dst.qpos0.copy()
    for j in range(dst.njnt):
        a, b, n = dst.jnt_qposadr[j], src.jnt_qposadr[src.joint(dst.joint(j).name).id], 7 if j == 0 else 1
        out[a : a + n] = q[b : b + n]
    return out


def test_frozen_hinges_place_every_geom_and_site_where_the_full_body_does():
    """At random angles of the kept joints, the body with frozen hinges puts every geom, site and body
    inertia exactly where the full body puts them with those hinges at their frozen angles (float64
    round-off: 1e-12)."""
    full = boxer.boxer_spec("simple").compile()
    spec = boxer.boxer_spec("simple")
    freeze.freeze_hinges(spec, FROZEN)
    frozen = spec.compile()
    assert frozen.nv == full.nv - len(FROZEN) and frozen.nu == full.nu - len(FROZEN)
    rng = np.random.default_rng(0)
    d_full, d_frozen = mujoco.MjData(full), mujoco.MjData(frozen)
    for _ in range(10):
        q = full.qpos0.copy()
        q[7:] = rng.uniform(-0.5, 0.5, full.nq - 7)
        q[:3], quat = rng.normal(size=3), rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        for name, angle in FROZEN.items():
            q[full.jnt_qposadr[full.joint(name).id]] = angle
        d_full.qpos[:], d_frozen.qpos[:] = q, _copy_qpos(full, q, frozen)
        mujoco.mj_kinematics(full, d_full)
        mujoco.mj_kinematics(frozen, d_frozen)
        for field in ("geom_xpos", "geom_xmat", "site_xpos", "xipos"):
            np.testing.assert_allclose(getattr(d_frozen, field), getattr(d_full, field), atol=1e-12)


def test_freezing_an_unknown_hinge_is_named():
    with pytest.raises(ValueError, match="'no_such_joint' is not a hinge"):
        freeze.freeze_hinges(boxer.boxer_spec("simple"), {"no_such_joint": 0.0})


def test_the_shipped_library_leaves_the_opponent_18_dofs():
    """The library never moves his neck, sideways lumbar and thorax, forearm roll and wrists (each held at
    its one angle) and never names his legs (held at the stance targets): 25 hinges frozen, 43 -> 18 dofs."""
    lib = punches.load()
    idle = punches.idle_hinges(lib, "simple")
    groups = {name.split("_")[0] for name in idle}
    assert groups == {"lumbar", "thorax", "neck", "forearm", "wrist", "hip", "knee", "ankle", "toe"}
    moving = [n for n in lib.joint_names if n not in idle]
    assert set(moving) >= {"lumbar_y", "lumbar_z", "elbow_l", "elbow_r", "shoulder_y_l", "shoulder_z_r"}
    world = sparring.build("simple", "simple", lib.distance_m, frozen_rad=idle)
    assert world.index.blue.nv == 18 and world.index.red.nv == 43
    table = punches.ctrl_table(lib, world.model, world.index.blue, idle)
    assert table.ctrl.shape[-1] == len(moving)


def test_a_library_that_moves_a_frozen_hinge_is_refused():
    lib = punches.load()
    idle = punches.idle_hinges(lib, "simple")
    world = sparring.build("simple", "simple", lib.distance_m, frozen_rad=idle)
    qpos = lib.qpos.copy()
    qpos[:, 5:, lib.joint_names.index("wrist_x_l")] = 0.2
    moved = dataclasses.replace(lib, qpos=qpos)
    with pytest.raises(ValueError, match=r"moves joints \['wrist_x_l'\] that are frozen"):
        punches.ctrl_table(moved, world.model, world.index.blue, idle)
    with pytest.raises(ValueError, match="not actuated"):  # frozen, but not named so
        punches.ctrl_table(lib, world.model, world.index.blue)


def _glove_paths(lib: punches.PunchLibrary, frozen: dict | None, kinematic: bool = False) -> list[np.ndarray]:
    """Per punch, (frames, 2, 3) the opponent's glove centres, our fighter 3 m away: simulated (MuJoCo C,
    his PD targets from the table, 5 substeps a frame) or `kinematic` (the targets as his joint angles)."""
    world = sparring.build("simple", "simple", lib.distance_m, frozen_rad=frozen)
    model, blue = world.model, world.index.blue
    table = np.asarray(punches.ctrl_table(lib, model, blue, frozen).ctrl)
    adr = model.jnt_qposadr[model.actuator_trnid[blue.actuator_ids, 0]]
    data, paths = mujoco.MjData(model), []
    for p in range(lib.size):
        data.qpos[:], data.qvel[:] = world.guard_qpos, 0.0
        data.qpos[world.index.red.qpos_adr] -= 3.0
        data.ctrl[:] = model.key_ctrl[world.index.keyframes["stance"]]
        path = []
        for t in range(lib.length[p] + 4):
            target = table[p, min(t, table.shape[1] - 1)]
            if kinematic:
                data.qpos[adr] = target
                mujoco.mj_kinematics(model, data)
            else:
                data.ctrl[blue.actuator_ids] = target
                mujoco.mj_step(model, data, nstep=5)
            path.append(data.geom_xpos[blue.glove_geom_ids].copy())
        paths.append(np.array(path))
    return paths


def test_the_frozen_opponent_throws_the_library_no_further_from_the_recording():
    """The physics changes: freezing drops those hinges' sway under his PD targets. Measured at commit time on
    the 36 library punches at 40 Hz: his gloves run up to 138 mm from the full opponent's (the largest gaps
    on hooks, where the free sideways lumbar and the legs swing), while both run far behind the recording
    (PD lag: mean 161 mm full, 144 mm frozen; the punching glove at impact 249 mm and 238 mm). Asserted: the
    frozen opponent is no further from the recording than the full one, on average and at impact, and no
    glove of his runs more than 0.15 m from the full opponent's."""
    lib = punches.resample(punches.load(), 40.0)
    recording = _glove_paths(lib, None, kinematic=True)
    full = _glove_paths(lib, None)
    frozen = _glove_paths(lib, punches.idle_hinges(lib, "simple"))

    def error(paths):
        gaps = [np.linalg.norm(s - r, axis=-1) for s, r in zip(paths, recording, strict=True)]
        hand = [punches.HANDS.index(h) for h in lib.hand]
        at_impact = [g[lib.impact[p], hand[p]] for p, g in enumerate(gaps)]
        return np.mean(np.concatenate([g.ravel() for g in gaps])), np.mean(at_impact)

    assert error(frozen)[0] <= error(full)[0] and error(frozen)[1] <= error(full)[1]
    gap = max(np.linalg.norm(a - b, axis=-1).max() for a, b in zip(frozen, full, strict=True))
    assert gap < 0.15, gap


def test_the_block_task_freezes_the_opponent_only_when_asked():
    """`BlockConfig.opponent_freeze_idle` (off by default: the seed's world) builds the opponent with 18 dofs
    and a punch table of his 12 moving hinges; a run description names the option only when it is on."""
    from boxjax.envs.block.env import BlockConfig, BlockEnv

    full, frozen = BlockEnv(BlockConfig()), BlockEnv(BlockConfig(opponent_freeze_idle=True))
    assert full.opponent.nv == 43 and not full.opponent_frozen
    assert frozen.opponent.nv == 18 and len(frozen.opponent_frozen) == 25
    assert frozen.mj_model.nv == full.mj_model.nv - 25
    assert frozen.default_params().punches.ctrl.shape[-1] == 12
    assert "opponent_freeze_idle" not in BlockConfig().to_dict()
    assert BlockConfig(opponent_freeze_idle=True).to_dict()["opponent_freeze_idle"] is True
