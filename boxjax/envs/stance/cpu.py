"""The stance task on the CPU: MuJoCo C worlds in one `mujoco.batch.Batch`, the task in numpy.

Observation, reward, termination, shoves and the reset pose are `boxjax.envs.stance.shared` and the
curriculum is `boxjax.envs.stance.env`'s, both shared with the JAX `StanceEnv`. What differs: random draws
come from a numpy generator, and a world is reset as soon as its episode ends (from fresh draws), not
from states drawn once per iteration. Every step runs a fixed number of numpy calls over all worlds at
once, so the Python cost per world shrinks with the number of worlds.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from boxjax import mjcf
from boxjax.envs.cpu_base import CpuStep
from boxjax.envs.stance import env as stance
from boxjax.envs.stance import shared as stance_math
from boxjax.envs.stance.env import StanceConfig
from boxjax.physics import cpu

_f32 = np.float32


@dataclasses.dataclass(frozen=True)
class StanceTask:
    """Per-world task state (numpy, leading axis num_worlds)."""

    step: np.ndarray
    """(K,) int32 control steps since the episode began."""
    phase: np.ndarray
    """(K,) int32 rhythm step."""
    next_shove: np.ndarray
    """(K,) int32 step of the next shove."""
    prev_action: np.ndarray
    """(K, A) float32 the last action."""
    obs: np.ndarray
    """(K, O) float32 observation to act on."""
    began_full: np.ndarray
    """(K,) float32 1.0 where the episode began at full amplitude."""


class StanceCpuEnv:
    """The stance task on `num_worlds` CPU worlds (see the module docstring and `cpu_base.CpuEnv`)."""

    def __init__(
        self, config: StanceConfig | None = None, num_worlds: int = 1, num_threads: int = 1, seed: int = 0
    ):
        config = config or StanceConfig()
        self.config = config
        self.mj_model, arena = mjcf.build(config.body)
        self.index = arena.red
        self.substeps = stance.control_substeps(self.mj_model, config)
        self.rhythm_steps = stance.rhythm_steps(config)
        self.shove_steps = stance.shove_steps(config)
        self.layout = stance_math.Layout.build(self.mj_model, self.index, self.rhythm_steps)
        self.nu = self.layout.nu
        self.action_size = int(self.index.action_size)
        self.observation_size = 4 * self.nu + 15 + self.action_size
        self.num_worlds = num_worlds
        self.tables = stance.reference_tables(self.index, config)
        self.worlds = cpu.make_worlds(self.mj_model, num_worlds, num_threads)
        self.qpos0 = self.mj_model.qpos0.astype(_f32)
        self.rng = np.random.default_rng(seed)
        self.amplitude = _f32(0.0)
        self.task: StanceTask | None = None

    def describe(self) -> dict:
        """What a checkpoint records about this environment."""
        return {"env": "stance", "body": self.config.body, "config": self.config.to_dict(), "physics": "cpu"}

    # -- curriculum (state on the learner; the same functions as the JAX environment) ----------------
    def init_curriculum(self) -> stance.StanceCurriculum:
        """Level 0, nothing counted yet."""
        return stance.init_curriculum()

    def update_curriculum(self, curriculum: Any, stats: Any) -> stance.StanceCurriculum:
        """See `boxjax.envs.stance.env.update_curriculum`."""
        return stance.update_curriculum(self.config, curriculum, stats)

    def solved(self, curriculum: Any, stats: Any) -> Any:
        """Whether a judged window at full amplitude met the solved rule."""
        return curriculum.solved

    def apply_curriculum(self, curriculum: Any) -> None:
        """Take the amplitude of the curriculum's level for the following steps and resets."""
        self.amplitude = _f32(np.asarray(stance.curriculum_amplitude(self.config, curriculum)))

    # -- stepping ---------------------------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        """Every world afresh; returns the first observations (K, O)."""
        k, a = self.num_worlds, self.action_size
        blank = StanceTask(
            step=np.zeros(k, np.int32),
            phase=np.zeros(k, np.int32),
            next_shove=np.zeros(k, np.int32),
            prev_action=np.zeros((k, a), _f32),
            obs=np.zeros((k, self.observation_size), _f32),
            began_full=np.zeros(k, _f32),
        )
        self.task = self._reset_worlds(blank, np.arange(k))
        return self.task.obs

    def step(self, action: np.ndarray) -> CpuStep:
        """One control step of every world with actions (K, A); finished worlds restart at once."""
        cfg, lay, task, worlds = self.config, self.layout, self.task, self.worlds
        action = np.asarray(action, _f32)
        phase = (task.phase + 1) % self.rhythm_steps
        ref_pose, ref_height = stance_math.reference(self.tables[phase], self.amplitude, lay.nu)
        worlds.ctrl[:] = stance_math.joint_targets(ref_pose, action, lay, cfg.action_scale_rad, np)
        shove = task.step == task.next_shove
        if shove.any():
            self._shove(np.flatnonzero(shove))
        failed = cpu.step(worlds, self.substeps)
        finite = cpu.is_finite(worlds) & ~failed
        qpos, qvel = worlds.qpos.astype(_f32), worlds.qvel.astype(_f32)
        if not finite.all():
            qpos[~finite], qvel[~finite] = self.qpos0, 0.0
        touch = worlds.sensordata[:, lay.touch_adr].astype(_f32)
        terms, fell = stance_math.score(
            qpos, qvel, touch, ref_pose, ref_height, action, task.prev_action, lay, cfg, np
        )
        nonfinite = (~finite).astype(_f32)  # reset and ended, but not a fall
        fell = fell * finite
        step = task.step + 1
        timeout = (step >= cfg.max_steps).astype(_f32) * (1.0 - fell)
        reward = np.where(finite, stance_math.total_reward(terms, fell, cfg.w_fall), _f32(0.0))
        next_shove = task.next_shove.copy()
        next_shove[shove] = step[shove] + self.rng.integers(*self.shove_steps, size=int(shove.sum()))
        obs = stance_math.observe(
            qpos, qvel, touch, ref_pose, ref_height, self.amplitude, phase, action, lay, np
        )
        obs[~finite] = 0.0
        done = np.maximum(np.maximum(fell, timeout), nonfinite)
        timeout_only, timeout = timeout, np.maximum(timeout, nonfinite)
        metrics = {f"reward/{k}": v for k, v in terms.items()}
        metrics.update(fall=fell, shove=shove.astype(_f32), nan=nonfinite)
        metrics.update(stance.solve_counts(fell, timeout_only * finite, task.began_full))
        task = StanceTask(
            step=step,
            phase=phase,
            next_shove=next_shove,
            prev_action=action,
            obs=obs,
            began_full=task.began_full,
        )
        ended = np.flatnonzero(done > 0.5)
        if ended.size:
            task = self._reset_worlds(task, ended)
        self.task = task
        return CpuStep(
            obs=task.obs,
            next_obs=obs,
            reward=reward.astype(_f32),
            done=done,
            truncation=timeout,
            metrics=metrics,
        )

    # -- pieces -----------------------------------------------------------------------------------------
    def _shove(self, ids: np.ndarray) -> None:
        lo, hi = self.config.shove_speed_mps
        angle = self.rng.uniform(0.0, 2.0 * np.pi, ids.size).astype(_f32)
        speed = self.rng.uniform(lo, hi, ids.size).astype(_f32)
        v = self.layout.root_v
        self.worlds.qvel[ids, v : v + 2] += stance_math.shove_velocity(angle, speed, np)

    def _reset_worlds(self, task: StanceTask, ids: np.ndarray) -> StanceTask:
        """`task` with worlds `ids` (sorted) restarted: physics reset and posed, fresh draws, new obs."""
        lay, worlds, n = self.layout, self.worlds, ids.size
        cpu.reset(worlds, ids)
        noise = self.config.init_noise_rad
        root, joints = stance_math.initial_pose(
            self.index, self.amplitude, self.rng.uniform(-noise, noise, (n, lay.nu)).astype(_f32), np
        )
        worlds.qpos[ids, lay.root_q : lay.root_q + 7] = root
        worlds.qpos[ids[:, None], lay.act_qpos_adr] = joints
        worlds.ctrl[ids] = joints
        phase = self.rng.integers(0, self.rhythm_steps, n).astype(np.int32)
        next_shove = self.rng.integers(*self.shove_steps, size=n).astype(np.int32)
        ref_pose, ref_height = stance_math.reference(self.tables[phase], self.amplitude, lay.nu)
        zeros = functools.partial(np.zeros, dtype=_f32)
        obs = stance_math.observe(
            worlds.qpos[ids].astype(_f32),
            zeros((n, worlds.qvel.shape[1])),
            zeros((n, 2)),
            ref_pose,
            ref_height,
            self.amplitude,
            phase,
            zeros((n, self.action_size)),
            lay,
            np,
        )
        out = {f.name: getattr(task, f.name).copy() for f in dataclasses.fields(task)}
        began_full = _f32(self.amplitude >= 1.0)
        fresh = (("step", 0), ("phase", phase), ("next_shove", next_shove), ("prev_action", 0.0))
        for name, value in (*fresh, ("began_full", began_full)):
            out[name][ids] = value
        out["obs"][ids] = obs
        return StanceTask(**out)
