"""Arm IK on the device: reaches reachable targets, fits every guard pose, vmaps over worlds."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from boxjax import mjcf
from boxjax.envs.block import ik as arm_ik

REACH_TOL_M = 1e-3
"""A target made from a reachable arm pose must be met to 1 mm."""
GUARD_TOL_M = 0.03
"""Every named guard pose must be fitted to 3 cm (they are hand-placed, not all exactly reachable)."""


@functools.cache
def problem():
    model, index = mjcf.arena.build("simple")
    ik = arm_ik.make_arm_ik(model, index.red)
    qpos = jnp.asarray(model.key("stance").qpos, jnp.float32)
    solve = jax.jit(jax.vmap(lambda q, t: arm_ik.solve_arms(ik, q, t)))
    return ik, qpos, solve


def test_reaches_a_target_made_from_a_reachable_pose_and_fits_every_guard():
    ik, qpos, solve = problem()
    rng = np.random.default_rng(0)
    mid = 0.5 * (ik.lower + ik.upper)
    wanted = np.clip(mid + rng.uniform(-0.5, 0.5, mid.shape), ik.lower, ik.upper).astype(np.float32)
    reachable = arm_ik.glove_positions(ik, qpos.at[ik.qpos_adr].set(wanted))
    guards = [arm_ik.guard_targets(ik, qpos, jnp.asarray(offsets)) for offsets in ik.targets_m]
    targets = jnp.stack([reachable, *guards])
    angles, residual = solve(jnp.broadcast_to(qpos, (targets.shape[0], qpos.shape[0])), targets)
    assert float(residual[0]) < REACH_TOL_M
    for name, r in zip(arm_ik.GUARD_POSES, np.asarray(residual[1:]), strict=True):
        assert r < GUARD_TOL_M, f"{name}: residual {r:.3f} m"
    assert np.all(np.asarray(angles) >= ik.lower - 1e-6) and np.all(np.asarray(angles) <= ik.upper + 1e-6)
    # the fitted angles really put the gloves there
    placed = arm_ik.glove_positions(ik, qpos.at[ik.qpos_adr].set(angles[0]))
    np.testing.assert_allclose(placed, reachable, atol=REACH_TOL_M)


def test_guard_targets_follow_the_fighters_heading():
    ik, qpos, _ = problem()
    base = arm_ik.guard_targets(ik, qpos, jnp.asarray(ik.targets_m[0]))
    turned = qpos.at[3:7].set(jnp.array([np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)], jnp.float32))
    rotated = arm_ik.guard_targets(ik, turned, jnp.asarray(ik.targets_m[0]))
    head = arm_ik._kinematics(ik, turned).xpos[ik.head_body]
    offsets = np.asarray(rotated - head)
    want = np.asarray(arm_ik.GUARD_POSES["high_guard"])
    # a quarter turn left (yaw +90 deg) maps forward (x) to left (y)
    np.testing.assert_allclose(offsets[:, 1], want[:, 0], atol=1e-4)
    assert base.shape == (2, 3)


def test_unknown_fighter_joint_is_named():
    model, index = mjcf.arena.build("simple")
    broken = index.red.__class__(**{**index.red.__dict__, "prefix": "green/"})
    with pytest.raises(KeyError, match="green/"):
        arm_ik.make_arm_ik(model, broken)


def test_hinge_jacobian_equals_differentiating_the_kinematics():
    model, index = mjcf.arena.build("simple")
    ik = arm_ik.make_arm_ik(model, index.red)
    qpos = jnp.asarray(model.key("stance").qpos, jnp.float32)
    adr = jnp.asarray(ik.qpos_adr)

    def gloves(angles):
        return arm_ik.glove_positions(ik, qpos.at[adr].set(angles)).reshape(-1)

    def both(angles):
        analytic = arm_ik.glove_jacobian(ik, arm_ik._kinematics(ik, qpos.at[adr].set(angles)))
        return analytic, jax.jacfwd(gloves)(angles)

    rng = np.random.default_rng(1)
    mid = 0.5 * (ik.lower + ik.upper)
    poses = np.clip(mid + rng.uniform(-0.6, 0.6, (3, mid.size)), ik.lower, ik.upper).astype(np.float32)
    with jax.default_matmul_precision("highest"):
        analytic, differentiated = jax.jit(jax.vmap(both))(jnp.asarray(poses))
    assert analytic.shape == (3, 6, len(ik.qpos_adr))
    np.testing.assert_allclose(analytic, differentiated, atol=1e-5)
    assert float(jnp.abs(analytic).max()) > 0.1  # not trivially zero


def test_arm_joints_must_be_hinges_above_their_glove():
    model, index = mjcf.arena.build("simple")
    model.jnt_type[model.joint("red/elbow_l").id] = mujoco.mjtJoint.mjJNT_SLIDE
    with pytest.raises(ValueError, match="red/elbow_l.*hinge above its glove"):
        arm_ik.make_arm_ik(model, index.red)


def test_mujoco_c_arm_fit_equals_the_mjx_one():
    """The CPU path's arm fit (`ik_cpu.ArmFit`, float64 on `mj_kinematics`) gives the angles and residual of
    `guard_targets` + `solve_arms` (float32 on MJX) for every guard pose, from noisy guards."""
    from boxjax.envs.block import ik_cpu

    arms, qpos0, _ = problem()
    model, index = mjcf.arena.build("simple")
    fit = ik_cpu.ArmFit(model, arms)
    jax_fit = jax.jit(
        lambda q, offsets: arm_ik.solve_arms(arms, q, arm_ik.guard_targets(arms, q, offsets), 12, 0.05)
    )
    rng = np.random.default_rng(1)
    for pose in range(len(arm_ik.GUARD_POSES)):
        qpos = np.array(qpos0)
        qpos[index.red.act_qpos_adr] += rng.uniform(-0.05, 0.05, index.red.act_qpos_adr.size).astype(
            np.float32
        )
        jitter = rng.uniform(-0.03, 0.03, (2, 3)).astype(np.float32)
        offsets = arms.targets_m[pose] + jitter
        want_angles, want_residual = jax_fit(jnp.asarray(qpos), jnp.asarray(offsets))
        angles, residual = fit.fit(qpos, offsets, 12, 0.05)
        np.testing.assert_allclose(angles, np.asarray(want_angles), atol=1e-5)  # measured: 1.1e-6 rad
        np.testing.assert_allclose(residual, float(want_residual), atol=1e-6)  # measured: 1.3e-7 m


def test_the_arms_posed_from_the_torso_match_the_whole_arena_and_so_does_their_fit():
    """`chain_kinematics` (each arm posed from the frame it hangs from) gives MJX's kinematics of the whole
    arena (measured: 1.8e-7 m, 1.2e-7 on axes and anchors), and `track_arms` over 12 steps the angles of
    `solve_arms` (same steps on the whole arena's kinematics)."""
    arms, qpos0, _ = problem()
    model, _ = mjcf.arena.build("simple")
    chain = arm_ik.make_arm_chain(model, arms)
    rng = np.random.default_rng(2)
    qpos = (
        jnp.asarray(qpos0)
        .at[arms.qpos_adr]
        .add(rng.uniform(-0.5, 0.5, arms.qpos_adr.size).astype(np.float32))
    )
    data = arm_ik._kinematics(arms, qpos)
    parents = jnp.asarray(chain.parent_body)
    frames = (data.xpos[parents], data.xmat[parents])
    gloves, axes, anchors = jax.jit(lambda f, q: arm_ik.chain_kinematics(chain, *f, q, q[arms.qpos_adr]))(
        frames, qpos
    )
    np.testing.assert_allclose(gloves, data.site_xpos[arms.glove_site_ids], atol=1e-5)
    np.testing.assert_allclose(axes, data.xaxis[arms.joint_ids], atol=1e-5)
    np.testing.assert_allclose(anchors, data.xanchor[arms.joint_ids], atol=1e-5)
    targets = arm_ik.guard_targets(arms, qpos, jnp.asarray(arms.targets_m[1]))
    want, want_residual = arm_ik.solve_arms(arms, qpos, targets, 12, 0.05)
    angles, residual = jax.jit(
        lambda f, q, t: arm_ik.track_arms(arms, chain, f, q, q[arms.qpos_adr], t, 12, 0.05)
    )(frames, qpos, targets)
    np.testing.assert_allclose(angles, want, atol=1e-4)
    np.testing.assert_allclose(residual, want_residual, atol=1e-5)


SOLVE_RTOL = 1e-5
"""`solve_spd` against a float64 solve, relative to the solution's size: float32 rounding at the damped
systems' condition numbers (at most 153 here); measured 2.8e-6, and 1.6e-6 for the library LU it replaced."""
FIT_ATOL_RAD = 1e-4
"""The arm fit (12 steps) against MuJoCo C's float64 fit from random arm poses: float32's noise, as measured
for the library LU solve the fit used before (8.5e-5 rad); measured 1.1e-5 rad with `solve_spd`."""


def test_the_fused_cholesky_solves_like_float64_and_the_fit_stays_within_float32_noise():
    """`solve_spd` (Cholesky written out, fused by XLA) on the fit's damped systems from 64 random arm
    poses, and the whole fit with it, against float64."""
    from boxjax.envs.block import ik_cpu

    ik, qpos0, solve = problem()
    model, _ = mjcf.arena.build("simple")
    rng = np.random.default_rng(0)
    mid = 0.5 * (ik.lower + ik.upper)
    qpos = np.repeat(np.asarray(qpos0)[None], 64, 0)
    qpos[:, ik.qpos_adr] = np.clip(mid + rng.uniform(-0.6, 0.6, (64, mid.size)), ik.lower, ik.upper)
    with jax.default_matmul_precision("highest"):
        jac = jax.vmap(lambda q: arm_ik.glove_jacobian(ik, arm_ik._kinematics(ik, q)))(jnp.asarray(qpos))
        damped = jnp.einsum("wij,wkj->wik", jac, jac) + 0.05**2 * jnp.eye(6)
    b = rng.normal(size=(64, 6)).astype(np.float32)
    x = jax.jit(jax.vmap(arm_ik.solve_spd))(damped, jnp.asarray(b))
    want = np.linalg.solve(np.asarray(damped, np.float64), b.astype(np.float64)[..., None])[..., 0]
    scale = np.abs(want).max(-1, keepdims=True)
    assert np.max(np.abs(np.asarray(x, np.float64) - want) / scale) < SOLVE_RTOL
    poses = ik.targets_m[rng.integers(0, len(ik.targets_m), 64)]
    offsets = (poses + rng.uniform(-0.03, 0.03, (64, 2, 3))).astype(np.float32)
    targets = jax.vmap(lambda q, o: arm_ik.guard_targets(ik, q, o))(jnp.asarray(qpos), jnp.asarray(offsets))
    angles, _ = solve(jnp.asarray(qpos), targets)
    fit = ik_cpu.ArmFit(model, ik)
    want_angles = np.array([fit.fit(q, o, 12, 0.05)[0] for q, o in zip(qpos, offsets, strict=True)])
    np.testing.assert_allclose(np.asarray(angles), want_angles, atol=FIT_ATOL_RAD)
