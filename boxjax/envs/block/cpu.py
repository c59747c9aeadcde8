"""The block task on the CPU: MuJoCo C worlds in one `mujoco.batch.Batch`, the task in JAX on the CPU.

The block task (mixed episodes, the opponent, vision, the punch score, the arm fit at reset, the rewards)
is not ported: it is `BlockEnv`'s own code, jitted on the CPU and vmapped over the K worlds of this
process. A step is `BlockEnv.before_physics` (punch clock, the opponent's targets and root anchor or the
puppet's pose, our PD targets, shove) →
MuJoCo's C engine (`boxjax.physics.cpu`) → `BlockEnv.after_physics` (see, score, reward, observe).
The MuJoCo worlds keep the float64 physics state; the task sees float32 copies of the fields it reads
(`PhysicsView`, which stands in for `mjx.Data` in `State.data`), as the JAX env sees MJX's.

A world whose episode ended restarts at once from the next unused episode of a pool of K fresh ones
(`BlockEnv.reset`, the arm fit included), drawn in one vmapped call whenever the pool runs out: one
compiled reset for every case, no reset computed that is not used, and the episodes are a function of
the seed alone. The task has no curriculum. The CPU path's learners record no distillation targets,
and with a walking teacher (`BlockConfig.teacher`) the environment gives its targets for the
observations about to be acted on (`distill_target`), which the collectors record for the learners.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from boxjax.envs.base import State
from boxjax.envs.block import ik_cpu
from boxjax.envs.block.env import BlockConfig, BlockEnv, BlockParams, StepDraws
from boxjax.envs.cpu_base import CpuStep
from boxjax.physics import cpu

_f32 = np.float32


@struct.dataclass
class PhysicsView:
    """The physics fields the block task reads, float32 (`mjx.Data`'s names, shapes and frames): one
    world's, or K worlds' with a leading axis. Derived fields describe the state before the last
    substep, as after `mjx.step`."""

    qpos: jax.Array
    """(nq,) joint positions."""
    qvel: jax.Array
    """(nv,) joint velocities."""
    ctrl: jax.Array
    """(nu,) actuator controls."""
    mocap_pos: jax.Array
    """(nmocap, 3) mocap bodies: the simulated opponent's root anchor, or the puppet's bodies."""
    mocap_quat: jax.Array
    """(nmocap, 4)."""
    sensordata: jax.Array
    """(nsensordata,) sensors (the feet's touch)."""
    xpos: jax.Array
    """(nbody, 3) body positions."""
    xmat: jax.Array
    """(nbody, 3, 3) body orientations."""
    geom_xpos: jax.Array
    """(ngeom, 3) geom positions."""
    geom_xmat: jax.Array
    """(ngeom, 3, 3) geom orientations."""
    site_xpos: jax.Array
    """(nsite, 3) site positions."""
    site_xmat: jax.Array
    """(nsite, 3, 3) site orientations."""


VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(PhysicsView))
DERIVED = ("xpos", "xmat", "geom_xpos", "geom_xmat", "site_xpos", "site_xmat")
"""Derived fields read from the MuJoCo worlds after each step (besides `sensordata`)."""


def view_of(data: Any) -> PhysicsView:
    """The `PhysicsView` of an `mjx.Data` (or anything with those fields), float32."""
    return PhysicsView(**{k: jnp.asarray(getattr(data, k), jnp.float32) for k in VIEW_FIELDS})


# -- the jitted halves (module level: the task is a static argument, params are passed in) ----------
def _fresh(task: BlockEnv, params: BlockParams, keys: jax.Array) -> State:
    """(B,) keys -> B new episodes (`CpuTask.reset`), without metrics, one after another (`lax.map`): the
    arm fit is a host callback per world."""
    return jax.lax.map(lambda key: task.reset(params, key), keys).replace(metrics={})


def _merge(state: State, pool: State, take: jax.Array, restart: jax.Array) -> State:
    """`state` (K worlds) with world i replaced by `pool`'s world take[i] where restart[i] ((K,) bool)."""

    def pick(old: jax.Array, new: jax.Array) -> jax.Array:
        return jnp.where(restart.reshape(-1, *(1,) * (old.ndim - 1)), new[take], old)

    return jax.tree.map(pick, state, pool)


def _before(task: BlockEnv, params: BlockParams, state: State, action: jax.Array) -> tuple[dict, StepDraws]:
    """`BlockEnv.before_physics` of K worlds: (what to write into the MuJoCo worlds, `StepDraws`)."""
    data, draws = jax.vmap(task.before_physics, in_axes=(None, 0, 0))(params, state, action)
    writes = {
        "ctrl": data.ctrl,
        "mocap_pos": data.mocap_pos,
        "mocap_quat": data.mocap_quat,
        "kick": data.qvel - state.data.qvel,  # the shove, added to MuJoCo's float64 velocities
    }
    return writes, draws


def _after(
    task: BlockEnv,
    names: tuple[str, ...],
    params: BlockParams,
    state: State,
    data: PhysicsView,
    action: jax.Array,
    draws: StepDraws,
):
    """`BlockEnv.after_physics` of K worlds: (state without metrics, {obs, reward, done, truncation,
    metrics (K, len(names))}), the second for the host in one transfer."""
    stepped = jax.vmap(task.after_physics, in_axes=(None, 0, 0, 0, 0))(params, state, data, action, draws)
    out = {
        "obs": stepped.obs,
        "reward": stepped.reward,
        "done": stepped.done,
        "truncation": stepped.truncation,
        "metrics": jnp.stack([stepped.metrics[k] for k in names], axis=-1),
    }
    return stepped.replace(metrics={}), out


def _distill(task: BlockEnv, params: BlockParams, state: State) -> tuple[jax.Array, jax.Array]:
    """`BlockEnv.distill_target` of K worlds."""
    return jax.vmap(task.distill_target, in_axes=(None, 0))(params, state)


_FRESH = jax.jit(_fresh, static_argnums=0)
_DISTILL = jax.jit(_distill, static_argnums=0)
_MERGE = jax.jit(_merge)
_BEFORE = jax.jit(_before, static_argnums=0)
_AFTER = jax.jit(_after, static_argnums=(0, 1))


class CpuTask(BlockEnv):
    """`BlockEnv` whose resets fit the command's arms on MuJoCo's C engine (`ik_cpu.ArmFit`, through a
    host callback) instead of MJX's kinematics; everything else is `BlockEnv`'s."""

    def __init__(self, config: BlockConfig):
        super().__init__(config)
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


@functools.lru_cache(maxsize=4)
def _task(config: BlockConfig) -> CpuTask:
    """One task per config in a process, so that its CPU environments (several collectors in serial
    mode, a test's) share the compiled functions above, whose static argument it is."""
    return CpuTask(config)


class BlockCpuEnv:
    """The block task on `num_worlds` CPU worlds (see the module docstring and `cpu_base.CpuEnv`)."""

    def __init__(
        self, config: BlockConfig | None = None, num_worlds: int = 1, num_threads: int = 1, seed: int = 0
    ):
        config = config or BlockConfig()
        self.config = config
        self.task = _task(config)
        self.mj_model = self.task.mj_model
        self.substeps = self.task.substeps
        self.observation_size = self.task.observation_size
        self.action_size = self.task.action_size
        self.num_worlds = num_worlds
        self.seed = seed
        self.worlds = cpu.make_worlds(self.mj_model, num_worlds, num_threads, derived=DERIVED)
        full = self.task.default_params()
        self.params = full.replace(model=None, ik_model=None, template=view_of(full.template))
        """The task's params without the MJX models (MuJoCo steps and fits the arms), a `PhysicsView`
        template."""
        self.metric_names = self.task.metric_names()
        self.state: State | None = None
        self.pool: State | None = None
        """K fresh episodes; those from `pool_next` on are unused."""
        self.pool_next = num_worlds
        self.pool_key = jax.random.PRNGKey(seed)
        if self.task.teacher is not None:
            self.distill_target = self._distill_target

    def describe(self) -> dict:
        """What a checkpoint records about this environment: the block task's, on MuJoCo C physics."""
        return {**self.task.describe(), "physics": "cpu"}

    def apply_curriculum(self, curriculum: Any) -> None:
        """The block task has no curriculum: nothing to apply."""

    # -- stepping ---------------------------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        """Every world afresh (from the pool of the seed's episodes); returns the first observations (K, O)
        float32."""
        self.pool_key, self.pool_next = jax.random.PRNGKey(self.seed), self.num_worlds
        self._refill()
        self.state, self.pool_next = self.pool, self.num_worlds
        self._load(self.state, np.arange(self.num_worlds))
        return np.asarray(self.state.obs)

    def step(self, action: np.ndarray) -> CpuStep:
        """One control step of every world with actions (K, A) in [-1, 1]; finished worlds restart at once."""
        action = jnp.asarray(action, jnp.float32)
        writes, draws = _BEFORE(self.task, self.params, self.state, action)
        writes = jax.device_get(writes)
        worlds = self.worlds
        worlds.ctrl[:] = writes["ctrl"]
        worlds.mocap_pos[:] = writes["mocap_pos"]
        worlds.mocap_quat[:] = writes["mocap_quat"]
        worlds.qvel[:] += writes["kick"]
        failed = cpu.step(worlds, self.substeps)
        view = self._view(failed)
        state, out = _AFTER(self.task, self.metric_names, self.params, self.state, view, action, draws)
        out = jax.device_get(out)
        ended = np.flatnonzero(out["done"] > 0.5)
        if ended.size:
            state = self._reset_worlds(state, ended)
        self.state = state
        return CpuStep(
            obs=np.asarray(state.obs),
            next_obs=out["obs"],
            reward=out["reward"],
            done=out["done"],
            truncation=out["truncation"],
            metrics={k: out["metrics"][:, i] for i, k in enumerate(self.metric_names)},
        )

    def _distill_target(self) -> tuple[np.ndarray, np.ndarray]:
        """(target, mask), each (K, A) float32: the walking teacher's leg actions on the current state
        (`BlockEnv.distill_target`; present with a teacher)."""
        target, mask = jax.device_get(_DISTILL(self.task, self.params, self.state))
        return np.asarray(target, np.float32), np.asarray(mask, np.float32)

    # -- pieces -----------------------------------------------------------------------------------------
    def _view(self, failed: np.ndarray) -> PhysicsView:
        """The worlds' fields after a step, float32 (K, ...); a failed world's qpos is NaN, so the task's
        NaN guard ends its episode."""
        w, k = self.worlds, self.num_worlds
        fields = {
            "qpos": w.qpos.astype(_f32),
            "qvel": w.qvel.astype(_f32),
            "ctrl": w.ctrl.astype(_f32),
            "mocap_pos": w.mocap_pos.astype(_f32),
            "mocap_quat": w.mocap_quat.astype(_f32),
            "sensordata": w.sensordata.astype(_f32),
        }
        for name in DERIVED:
            value = w.derived[name].astype(_f32)
            fields[name] = value.reshape(k, -1, 3, 3) if name.endswith("xmat") else value
        fields["qpos"][failed] = np.nan
        return PhysicsView(**fields)

    def _refill(self) -> None:
        """A new pool of K fresh episodes from the next key of the seed's chain."""
        self.pool_key, key = jax.random.split(self.pool_key)
        self.pool = _FRESH(self.task, self.params, jax.random.split(key, self.num_worlds))
        self.pool_next = 0

    def _reset_worlds(self, state: State, ids: np.ndarray) -> State:
        """`state` with worlds `ids` (sorted) in the pool's next episodes, their MuJoCo worlds posed."""
        k = self.num_worlds
        while ids.size:
            if self.pool_next == k:
                self._refill()
            n = min(ids.size, k - self.pool_next)
            part, ids = ids[:n], ids[n:]
            take, restart = np.zeros(k, np.int32), np.zeros(k, bool)
            take[part], restart[part] = np.arange(self.pool_next, self.pool_next + n), True
            state = _MERGE(state, self.pool, take, restart)
            self.pool_next += n
            self._load(state, part)
        return state

    def _load(self, state: State, ids: np.ndarray) -> None:
        """MuJoCo worlds `ids` reset and posed as in `state`: qpos, zero qvel, ctrl, the mocap bodies."""
        cpu.reset(self.worlds, ids)
        d = state.data
        qpos, ctrl, mocap_pos, mocap_quat = jax.device_get((d.qpos, d.ctrl, d.mocap_pos, d.mocap_quat))
        w = self.worlds
        w.qpos[ids], w.ctrl[ids] = qpos[ids], ctrl[ids]
        w.mocap_pos[ids], w.mocap_quat[ids] = mocap_pos[ids], mocap_quat[ids]
