"""The block task's piece of the CPU path: the arm fit of a block press at reset on MuJoCo's C engine.

`boxjax.envs.cpu.CpuEnv` runs the block task's own step around MuJoCo's C engine; only its resets differ:
the command's arms are fitted by `ik_cpu.ArmFit` (float64, the C engine's kinematics) through a host
callback, since the CPU path's params hold no MJX model.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from boxjax.envs.block import ik_cpu
from boxjax.envs.block.env import BlockConfig, BlockEnv, BlockParams
from boxjax.physics.backend import Backend


class CpuTask(BlockEnv):
    """`BlockEnv` whose resets fit the command's arms on MuJoCo's C engine (`ik_cpu.ArmFit`, through a
    host callback) instead of MJX's kinematics; everything else is `BlockEnv`'s. One learner only: the
    learned opponent (`BlockConfig.opponent_policy` "learned") is refused."""

    def __init__(self, config: BlockConfig, backend: Backend | None = None):
        if config.opponent_policy != "scripted":
            raise ValueError(
                f"BlockConfig.opponent_policy={config.opponent_policy!r} runs on the JAX/MJX path only "
                "(boxjax.envs.make, a GPU or the 'jax' impl); the CPU path on MuJoCo's C engine steps one "
                "learner: use opponent_policy='scripted' there"
            )
        super().__init__(config, backend)
        self.arm_fit = ik_cpu.ArmFit(self.mj_model, self.arm_ik)

    def _fit_arms(self, params: BlockParams, qpos: jax.Array, offset: jax.Array):
        """(arm angles (J,), IK residual ()) from `ik_cpu.ArmFit.fit` (one world: call under `lax.map`)."""
        cfg = self.config
        fit = functools.partial(self.arm_fit.fit, iterations=cfg.ik_iterations, damping=cfg.ik_damping)
        shapes = (
            jax.ShapeDtypeStruct((self.arm_ik.qpos_adr.shape[0],), jnp.float32),
            jax.ShapeDtypeStruct((), jnp.float32),
        )
        return jax.pure_callback(fit, shapes, qpos, offset)
