"""The arm fit of `boxjax.envs.block.ik` on MuJoCo's C engine, for the CPU path's resets.

The same damped-least-squares steps, hinge-formula Jacobian, joint-limit clipping and guard targets as
`ik.guard_targets` and `ik.solve_arms`, computed in float64 on `mujoco.mj_kinematics` instead of MJX's
kinematics, which XLA's CPU backend runs slowly for the 89-DoF bodies (about 1.6 s per muscular reset).
"""

from __future__ import annotations

import mujoco
import numpy as np

from boxjax.envs.block.ik import ArmIK


class ArmFit:
    """One fighter's arm fit on a private `MjData` of `model` (not thread-safe: one per process)."""

    def __init__(self, model: mujoco.MjModel, arm_ik: ArmIK):
        self.model = model
        self.data = mujoco.MjData(model)
        self.ik = arm_ik
        self.own = (arm_ik.side[None, :] == np.arange(2)[:, None]).astype(np.float64)
        """(2, J) 1 where joint j moves glove i."""

    def _kinematics(self, qpos: np.ndarray) -> mujoco.MjData:
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        return self.data

    def _gloves(self) -> np.ndarray:
        return self.data.site_xpos[self.ik.glove_site_ids]

    def targets(self, qpos: np.ndarray, offsets_m: np.ndarray) -> np.ndarray:
        """(2, 3) world glove targets of the guard offsets `offsets_m` (2, 3), as `ik.guard_targets`."""
        data = self._kinematics(qpos)
        forward = data.xmat[self.ik.pelvis_body].reshape(3, 3)[:, 0]
        yaw = np.arctan2(forward[1], forward[0])
        c, s = np.cos(yaw), np.sin(yaw)
        heading = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        return data.xpos[self.ik.head_body] + offsets_m @ heading.T

    def jacobian(self) -> np.ndarray:
        """(6, J) of the last kinematics pass, as `ik.glove_jacobian`."""
        joints, data = self.ik.joint_ids, self.data
        columns = np.cross(data.xaxis[joints], self._gloves()[self.ik.side] - data.xanchor[joints])
        return (self.own[:, None, :] * columns.T[None, :, :]).reshape(6, -1)

    def solve(
        self, qpos: np.ndarray, targets: np.ndarray, iterations: int, damping: float
    ) -> tuple[np.ndarray, float]:
        """(arm angles (J,), residual in metres of the worse glove), as `ik.solve_arms`."""
        qpos = np.array(qpos, np.float64)
        adr, goal = self.ik.qpos_adr, np.asarray(targets, np.float64).reshape(-1)
        for _ in range(iterations):
            self._kinematics(qpos)
            error = goal - self._gloves().reshape(-1)
            jac = self.jacobian()
            step = jac.T @ np.linalg.solve(jac @ jac.T + damping**2 * np.eye(goal.size), error)
            qpos[adr] = np.clip(qpos[adr] + step, self.ik.lower, self.ik.upper)
        self._kinematics(qpos)
        residual = np.max(np.linalg.norm((goal - self._gloves().reshape(-1)).reshape(2, 3), axis=-1))
        return qpos[adr], float(residual)

    def fit(
        self, qpos: np.ndarray, offsets_m: np.ndarray, iterations: int, damping: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(arm angles (J,) float32, residual () float32) of the guard offsets `offsets_m` (2, 3) for a
        fighter in `qpos`."""
        qpos = np.asarray(qpos, np.float64)
        targets = self.targets(qpos, np.asarray(offsets_m, np.float64))
        angles, residual = self.solve(qpos, targets, iterations, damping)
        return angles.astype(np.float32), np.float32(residual)
