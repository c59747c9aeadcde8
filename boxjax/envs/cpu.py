"""Any task on the CPU path: MuJoCo C worlds in one `mujoco.batch.Batch` around the task's own JAX code.

Every task's step has one shape: ``before_physics(params, state, action) -> (data, draws)`` (everything up
to the physics: actions to controls, the opponent's targets, a shove's kick), the physics, and
``after_physics(params, state, data, action, draws) -> State`` (guard, observe, score). On the GPU path
the task's own `step` composes the halves around MJX; `CpuEnv` composes them around MuJoCo's C engine
(`boxjax.physics.cpu`), with the halves jitted on the CPU and vmapped over the K worlds of a process. The
task is built on the C engine's backend (`boxjax.physics.cpu.CBackend`): the MuJoCo worlds keep the float64
physics state, the task sees float32 copies of the fields it reads (`boxjax.physics.cpu.PhysicsView`, its
`State.data`) and the worlds' overflow read-out, as the JAX env sees MJX's.
`before_physics` may change the controls, the mocap bodies and the velocities (a shove: the change is
added to MuJoCo's float64 velocities); nothing else of the physics state.

A world whose episode ended restarts at once from the next unused episode of a pool of K fresh ones
(the task's `reset`), drawn in one call whenever the pool runs out (or the curriculum changed the
params): one compiled reset for every case, and the episodes are a function of the seed alone.

A CPU environment (what `boxjax.rl.cpu.workers` drives) is an object with

* ``observation_size``, ``action_size`` and ``num_worlds`` (ints);
* ``describe() -> dict``: what a checkpoint records about it;
* ``reset() -> obs``: every world afresh, (num_worlds, observation_size) float32;
* ``step(action) -> CpuStep``: all worlds one control step with actions (num_worlds, action_size) in
  [-1, 1]; worlds whose episode ended are reset at once (`CpuStep.obs` continues, `CpuStep.next_obs`
  is what they reached);
* ``apply_curriculum(curriculum)``: take the values of a curriculum state (numpy leaves);
* optionally ``distill_target() -> (target, mask)``, each (num_worlds, action_size) float32: what the
  policy mean should be on the observations about to be acted on, and on which dims (a teacher's actions).

The curriculum state itself lives with the learner, as on the GPU path: the hooks ``init_curriculum``,
``update_curriculum`` and ``solved`` are the task's (`boxjax.envs.base`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from boxjax.envs import base
from boxjax.physics import cpu as mujoco_c


@dataclasses.dataclass(frozen=True)
class CpuStep:
    """What one step of all worlds returns (numpy, leading axis num_worlds)."""

    obs: np.ndarray
    """(K, O) float32 observation to act on next (a fresh episode's where one ended)."""
    next_obs: np.ndarray
    """(K, O) float32 observation reached by this step, before any reset (for bootstrapping)."""
    reward: np.ndarray
    """(K,) float32."""
    done: np.ndarray
    """(K,) float32 1.0 where the episode ended (terminated or truncated)."""
    truncation: np.ndarray
    """(K,) float32 1.0 where it ended by the time limit only."""
    metrics: dict[str, np.ndarray]
    """Named (K,) float32 per-step figures, averaged per iteration."""


# -- the jitted halves (module level: the task is a static argument, params are passed in) ----------
def _fresh(task: Any, params: Any, keys: jax.Array) -> base.State:
    """(B,) keys -> B new episodes without metrics, one after another (`lax.map`: a task's reset may make
    a host callback per world, as the block task's arm fit does)."""
    return jax.lax.map(lambda key: task.reset(params, key), keys).replace(metrics={})


def _merge(state: base.State, pool: base.State, take: jax.Array, restart: jax.Array) -> base.State:
    """`state` (K worlds) with world i replaced by `pool`'s world take[i] where restart[i] ((K,) bool)."""

    def pick(old: jax.Array, new: jax.Array) -> jax.Array:
        return jnp.where(restart.reshape(-1, *(1,) * (old.ndim - 1)), new[take], old)

    return jax.tree.map(pick, state, pool)


def _before(task: Any, params: Any, state: base.State, action: jax.Array) -> tuple[dict, Any]:
    """`before_physics` of K worlds: (what to write into the MuJoCo worlds, the task's draws)."""
    data, draws = jax.vmap(task.before_physics, in_axes=(None, 0, 0))(params, state, action)
    writes = {
        "ctrl": data.ctrl,
        "mocap_pos": data.mocap_pos,
        "mocap_quat": data.mocap_quat,
        "kick": data.qvel - state.data.qvel,
    }
    return writes, draws


def _after(
    task: Any,
    names: tuple[str, ...],
    params: Any,
    state: base.State,
    data: mujoco_c.PhysicsView,
    action: jax.Array,
    draws: Any,
):
    """`after_physics` of K worlds: (state without metrics, {obs, reward, done, truncation, metrics
    (K, len(names))}), the second for the host in one transfer."""
    stepped = jax.vmap(task.after_physics, in_axes=(None, 0, 0, 0, 0))(params, state, data, action, draws)
    out = {
        "obs": stepped.obs,
        "reward": stepped.reward,
        "done": stepped.done,
        "truncation": stepped.truncation,
        "metrics": jnp.stack([stepped.metrics[k] for k in names], axis=-1),
    }
    return stepped.replace(metrics={}), out


def _distill(task: Any, params: Any, state: base.State) -> tuple[jax.Array, jax.Array]:
    """The task's `distill_target` of K worlds."""
    return jax.vmap(task.distill_target, in_axes=(None, 0))(params, state)


_FRESH = jax.jit(_fresh, static_argnums=0)
_DISTILL = jax.jit(_distill, static_argnums=0)
_MERGE = jax.jit(_merge)
_BEFORE = jax.jit(_before, static_argnums=0)
_AFTER = jax.jit(_after, static_argnums=(0, 1))


@functools.lru_cache(maxsize=8)
def task_env(config: base.TaskConfig) -> Any:
    """The task env of `config` on MuJoCo's C engine (`boxjax.envs.on_c_engine`): one per config in a
    process, so that its CPU environments (several collectors in serial mode, a test's) share the compiled
    halves above, whose static argument it is."""
    from boxjax import envs

    return envs.on_c_engine(config)


def metric_names(task: Any, params: Any) -> tuple[str, ...]:
    """The names of the task's per-step figures, sorted (read from its reset, nothing computed)."""
    state = jax.eval_shape(task.reset, params, jax.random.PRNGKey(0))
    return tuple(sorted(state.metrics))


class CpuEnv:
    """The task of `config` on `num_worlds` MuJoCo C worlds (see the module docstring)."""

    def __init__(self, config: base.TaskConfig, num_worlds: int = 1, num_threads: int = 1, seed: int = 0):
        self.config = config
        self.task = task_env(config)
        self.mj_model = self.task.mj_model
        self.substeps = self.task.substeps
        self.observation_size = self.task.observation_size
        self.action_size = self.task.action_size
        self.num_worlds = num_worlds
        self.seed = seed
        self.derived = self.task.backend.derived
        self.worlds = mujoco_c.make_worlds(self.mj_model, num_worlds, num_threads, derived=self.derived)
        self.base_params = self.task.default_params()
        """The task's params on the C engine's backend, before any curriculum."""
        self.params = self.base_params
        self.metric_names = metric_names(self.task, self.params)
        self.state: base.State | None = None
        self.pool: base.State | None = None
        """K fresh episodes; those from `pool_next` on are unused."""
        self.pool_next = num_worlds
        self.pool_key = jax.random.PRNGKey(seed)
        if callable(getattr(self.task, "distill_target", None)):
            self.distill_target = self._distill_target

    def describe(self) -> dict:
        """What a checkpoint records about this environment: the task's, on MuJoCo C physics."""
        return {**self.task.describe(), "physics": "cpu"}

    # -- curriculum (its state lives on the learner; the task's functions) -----------------------------
    def init_curriculum(self) -> Any:
        """The task's initial curriculum state."""
        return base.init_curriculum(self.task)

    def update_curriculum(self, curriculum: Any, stats: base.EpisodeSummary) -> Any:
        """The task's curriculum after one iteration's episode figures."""
        return base.update_curriculum(self.task, curriculum, stats)

    def solved(self, curriculum: Any, stats: base.EpisodeSummary) -> jax.Array:
        """The task's solved rule."""
        return base.curriculum_solved(self.task, curriculum, stats)

    def apply_curriculum(self, curriculum: Any) -> None:
        """Take the curriculum's values for the following steps and resets; the unused fresh episodes are
        drawn again when they change."""
        if not callable(getattr(self.task, "apply_curriculum", None)):
            return
        params = self.task.apply_curriculum(self.base_params, jax.tree.map(jnp.asarray, curriculum))
        old, new = jax.tree.leaves(self.params), jax.tree.leaves(params)
        if any(not np.array_equal(a, b) for a, b in zip(old, new, strict=True)):
            self.params, self.pool_next = params, self.num_worlds

    # -- stepping ---------------------------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        """Every world afresh (from the pool of the seed's episodes); returns the first observations (K, O)
        float32."""
        self.pool_key = jax.random.PRNGKey(self.seed)
        self._refill()
        self.state, self.pool_next = self.pool, self.num_worlds
        self.reached = self.state
        self._load(self.state, np.arange(self.num_worlds))
        return np.asarray(self.state.obs)

    def step(self, action: np.ndarray) -> CpuStep:
        """One control step of every world with actions (K, A) in [-1, 1]; finished worlds restart at once.
        `reached` then holds every world's state as the step left it, before those restarts (`state`)."""
        action = jnp.asarray(action, jnp.float32)
        writes, draws = _BEFORE(self.task, self.params, self.state, action)
        writes = jax.device_get(writes)
        worlds = self.worlds
        worlds.ctrl[:] = writes["ctrl"]
        worlds.mocap_pos[:] = writes["mocap_pos"]
        worlds.mocap_quat[:] = writes["mocap_quat"]
        worlds.qvel[:] += writes["kick"]
        view = mujoco_c.view(worlds, mujoco_c.step(worlds, self.substeps))
        state, out = _AFTER(self.task, self.metric_names, self.params, self.state, view, action, draws)
        out = jax.device_get(out)
        ended = np.flatnonzero(out["done"] > 0.5)
        self.reached = state
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
        """(target, mask), each (K, A) float32: the task's distillation target on the current state
        (present when the task has one, e.g. the block task with a walking teacher)."""
        target, mask = jax.device_get(_DISTILL(self.task, self.params, self.state))
        return np.asarray(target, np.float32), np.asarray(mask, np.float32)

    # -- pieces -----------------------------------------------------------------------------------------
    def _refill(self) -> None:
        """A new pool of K fresh episodes from the next key of the seed's chain."""
        self.pool_key, key = jax.random.split(self.pool_key)
        self.pool = _FRESH(self.task, self.params, jax.random.split(key, self.num_worlds))
        self.pool_next = 0

    def _reset_worlds(self, state: base.State, ids: np.ndarray) -> base.State:
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

    def _load(self, state: base.State, ids: np.ndarray) -> None:
        """MuJoCo worlds `ids` reset and posed as in `state`: qpos, zero qvel, ctrl, the mocap bodies."""
        mujoco_c.reset(self.worlds, ids)
        d = state.data
        qpos, ctrl, mocap_pos, mocap_quat = jax.device_get((d.qpos, d.ctrl, d.mocap_pos, d.mocap_quat))
        w = self.worlds
        w.qpos[ids], w.ctrl[ids] = qpos[ids], ctrl[ids]
        w.mocap_pos[ids], w.mocap_quat[ids] = mocap_pos[ids], mocap_quat[ids]
