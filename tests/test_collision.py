"""Convex collision as built (`boxer.CCD_ITERATIONS`) finds the contacts MuJoCo's default finds.

The muscular block world is stepped on MuJoCo's C engine with random actions; at a few of its states MuJoCo
Warp's collision (the GPU path's, here on Warp's CPU device) runs once with the model as built and once with
MuJoCo's default cap of 35 GJK/EPA iterations. The contacts that involve a muscle must agree.
"""

import mujoco
import numpy as np
import pytest

from boxjax.envs.block import BlockConfig
from boxjax.envs.block_cpu import BlockCpuEnv
from boxjax.mjcf import boxer

WORLDS = 16
CHECK_STEPS = (25, 50, 75, 100, 125, 150)
"""Control steps at which the contacts are compared."""
MUJOCO_CCD_ITERATIONS = 35
DIST_ATOL_M = 1e-5
NORMAL_ATOL_DEG = 1.0
GRAZING_M = 1e-5
"""A contact this close to touching may be found with one cap and not the other (GJK stops either side)."""


def muscle_contacts(mj_model, warp_model, worlds) -> dict:
    """{(world, geom1, geom2): (distance m, unit normal)} of the contacts that involve an ellipsoid (a
    muscle), by MuJoCo Warp's collision at each world's state."""
    import mujoco.mjx.third_party.mujoco_warp as mjw

    data = mujoco.MjData(mj_model)
    found = {}
    for world in range(len(worlds.qpos)):
        data.qpos[:], data.qvel[:] = worlds.qpos[world], worlds.qvel[world]
        data.mocap_pos[:], data.mocap_quat[:] = worlds.mocap_pos[world], worlds.mocap_quat[world]
        mujoco.mj_kinematics(mj_model, data)
        warp_data = mjw.put_data(mj_model, data, nworld=1, naconmax=512, njmax=1024)
        mjw.kinematics(warp_model, warp_data)
        mjw.collision(warp_model, warp_data)
        count = int(warp_data.nacon.numpy()[0])
        geoms = warp_data.contact.geom.numpy()[:count]
        dists = warp_data.contact.dist.numpy()[:count]
        frames = warp_data.contact.frame.numpy()[:count]
        for (g1, g2), dist, frame in zip(geoms, dists, frames, strict=True):
            if mujoco.mjtGeom.mjGEOM_ELLIPSOID in (mj_model.geom_type[g1], mj_model.geom_type[g2]):
                found[world, int(g1), int(g2)] = (float(dist), frame[0].copy())
    return found


def test_capped_convex_collision_finds_the_default_contacts():
    import mujoco.mjx.third_party.mujoco_warp as mjw
    import warp as wp

    wp.config.quiet = True
    env = BlockCpuEnv(BlockConfig(body="muscular"), num_worlds=WORLDS)
    mj_model = env.mj_model
    assert mj_model.opt.ccd_iterations == boxer.CCD_ITERATIONS < MUJOCO_CCD_ITERATIONS
    with wp.ScopedDevice("cpu"):
        as_built = mjw.put_model(mj_model)
        mj_model.opt.ccd_iterations = MUJOCO_CCD_ITERATIONS
        default = mjw.put_model(mj_model)
        mj_model.opt.ccd_iterations = boxer.CCD_ITERATIONS
        env.reset()
        rng = np.random.default_rng(0)
        compared = 0
        for step in range(1, max(CHECK_STEPS) + 1):
            env.step(np.clip(rng.normal(0.0, 0.3, (WORLDS, env.action_size)), -1.0, 1.0))
            if step not in CHECK_STEPS:
                continue
            want = muscle_contacts(mj_model, default, env.worlds)
            got = muscle_contacts(mj_model, as_built, env.worlds)
            for key in set(want) ^ set(got):
                dist = (want.get(key) or got.get(key))[0]
                assert abs(dist) <= GRAZING_M, f"step {step}: contact {key} at {dist} m found by one cap only"
            for key in set(want) & set(got):
                (dist_want, normal_want), (dist_got, normal_got) = want[key], got[key]
                assert dist_got == pytest.approx(dist_want, abs=DIST_ATOL_M), f"step {step}: {key}"
                cos = np.clip(abs(normal_want @ normal_got), -1.0, 1.0)
                assert np.degrees(np.arccos(cos)) <= NORMAL_ATOL_DEG, f"step {step}: {key} normal"
                compared += 1
    assert compared >= len(CHECK_STEPS)  # not an empty check: muscles touched at these states (12 did)
