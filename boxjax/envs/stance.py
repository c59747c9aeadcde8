"""Stance: stand in the boxing guard, keep the rhythm of a reference motion, survive shoves.

The reference motion bounces the whole pose along the stand -> stance direction. Its tables (stand pose,
stance pose with the rhythm, root heights) sit side by side in one array and are read with ONE lookup per
step. A curriculum widens the stance from `stand` to the full guard in `levels` steps; after each rise it
waits `wait_episodes` episodes per world before it may rise again. Solved = full amplitude, at most 5 % of
episodes ending in a fall, and episodes lasting the full 10 s.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from mujoco import mjx

from boxjax import mjcf
from boxjax.envs import rewards
from boxjax.envs.base import EpisodeSummary, State
from boxjax.physics import mjx as physics


@dataclasses.dataclass(frozen=True)
class StanceConfig:
    """Task settings of the stance environment."""

    body: str = "simple"
    """Boxer body: one of `boxjax.mjcf.BODIES`."""
    control_dt_s: float = 0.025
    """Seconds between policy actions (a multiple of the physics timestep)."""
    episode_s: float = 10.0
    """Episode length in seconds (the time limit)."""
    action_scale_rad: float = 0.4
    """Joint-target offset from the reference for an action of 1."""
    rhythm_period_s: float = 0.8
    """Period of the reference bounce."""
    rhythm_depth: float = 0.15
    """Bounce depth as a fraction of the stand -> stance pose difference."""
    shove_interval_s: tuple[float, float] = (1.5, 3.5)
    """Range of the random time between shoves."""
    shove_speed_mps: tuple[float, float] = (0.2, 0.7)
    """Range of the horizontal root-velocity kick of a shove."""
    init_noise_rad: float = 0.02
    """Uniform noise on the initial joint angles."""
    fall_height_fraction: float = 0.65
    """A fall: root below this fraction of its reference height..."""
    fall_upright_cos: float = 0.5
    """...or the pelvis tilted past arccos of this."""
    levels: int = 8
    """Curriculum steps from stand (amplitude 0) to the full stance (amplitude 1)."""
    wait_episodes: float = 2.0
    """Episodes per world to wait after a rise before the next one."""
    rise_max_fall_rate: float = 0.2
    """The amplitude may rise only while at most this share of episodes ends in a fall."""
    solved_max_fall_rate: float = 0.05
    """Solved needs at most this share of falls at full amplitude..."""
    solved_min_length_fraction: float = 0.95
    """...and episodes lasting at least this fraction of the time limit on average."""
    w_alive: float = 1.0
    """Per-step survival bonus."""
    w_pose: float = 1.0
    """Weight of tracking the reference pose."""
    w_height: float = 0.5
    """Weight of tracking the reference root height."""
    w_upright: float = 0.5
    """Weight of keeping the pelvis upright."""
    w_feet: float = 0.3
    """Weight of carrying the weight on both feet (foot contact forces)."""
    w_action_rate: float = 0.1
    """Penalty weight on action changes."""
    w_root_speed: float = 0.1
    """Penalty weight on horizontal root speed."""
    w_fall: float = 10.0
    """Penalty on the step that falls."""

    def __post_init__(self) -> None:
        """Reject unknown bodies and bad values with the valid choices named."""
        if self.body not in mjcf.BODIES:
            raise ValueError(f"unknown body {self.body!r}; valid: {', '.join(mjcf.BODIES)}")
        if self.control_dt_s <= 0 or self.episode_s <= 0 or self.levels <= 0:
            raise ValueError("StanceConfig: control_dt_s, episode_s and levels must be positive")

    @property
    def max_steps(self) -> int:
        """Control steps per episode."""
        return int(round(self.episode_s / self.control_dt_s))

    def to_dict(self) -> dict:
        """JSON-friendly copy."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


@struct.dataclass
class StanceParams:
    """Everything a stance step reads that is not static (passed in, never closed over)."""

    model: mjx.Model
    template: mjx.Data
    tables: jax.Array
    """(rhythm_steps, 2 * nu + 2): stand pose | stance pose with rhythm | stand height | stance height."""
    amplitude: jax.Array
    """() stance amplitude in [0, 1], written by the curriculum."""


@struct.dataclass
class StanceInfo:
    """Per-world task state."""

    step: jax.Array
    phase: jax.Array
    next_shove: jax.Array
    prev_action: jax.Array
    key: jax.Array


@struct.dataclass
class StanceCurriculum:
    """Curriculum state (lives in the training state)."""

    level: jax.Array
    world_steps: jax.Array
    """Control steps per world in the current judging window."""
    episodes: jax.Array
    """Episodes finished in the current window (and its falls and summed lengths below)."""
    falls: jax.Array
    length_sum: jax.Array
    last_fall_rate: jax.Array
    """Fall rate of the last judged window."""
    solved: jax.Array
    """() bool: a judged window at full amplitude met the solved rule."""


def _reference_tables(index: mjcf.FighterIndex, config: StanceConfig, stand_h: float, stance_h: float):
    rows = max(2, int(round(config.rhythm_period_s / config.control_dt_s)))
    phase = 2.0 * np.pi * np.arange(rows) / rows
    stand = np.broadcast_to(index.stand_ctrl, (rows, index.stand_ctrl.shape[0]))
    delta = index.stance_ctrl - index.stand_ctrl
    stance = index.stance_ctrl + config.rhythm_depth * np.sin(phase)[:, None] * delta
    heights = np.broadcast_to(np.array([stand_h, stance_h]), (rows, 2))
    return np.concatenate([stand, stance, heights], axis=1).astype(np.float32)


class StanceEnv:
    """The stance task on one boxer body (see the module docstring)."""

    def __init__(
        self, config: StanceConfig = StanceConfig(), physics_config: physics.PhysicsConfig | None = None
    ):
        self.config = config
        self.mj_model, arena = mjcf.build(config.body)
        self.index = arena.red
        budget = mjcf.CONTACT_BUDGET[config.body]
        self.physics = physics_config or physics.PhysicsConfig(
            contacts_per_world=budget.ncon_per_world, njmax=budget.njmax
        )
        self.substeps = int(round(config.control_dt_s / self.mj_model.opt.timestep))
        if not math.isclose(self.substeps * self.mj_model.opt.timestep, config.control_dt_s, rel_tol=1e-6):
            raise ValueError(
                f"control_dt_s {config.control_dt_s} is not a multiple of the physics timestep "
                f"{self.mj_model.opt.timestep}"
            )
        idx = self.index
        self.nu = int(idx.act_qpos_adr.shape[0])
        self.action_size = int(idx.action_size)
        self.observation_size = 4 * self.nu + 15 + self.action_size
        self.body_weight_n = float(self.mj_model.body_subtreemass[0] * -self.mj_model.opt.gravity[2])
        self.root_q = int(idx.qpos_adr)
        self.root_v = int(idx.dof_adr)
        self.stand_height = float(idx.stand_qpos[2])
        self.stance_height = float(idx.stance_qpos[2])
        self.rhythm_steps = max(2, int(round(config.rhythm_period_s / config.control_dt_s)))
        self.shove_steps = tuple(int(round(s / config.control_dt_s)) for s in config.shove_interval_s)

    # -- protocol -------------------------------------------------------------------------------------
    def describe(self) -> dict:
        """What a checkpoint records about this environment."""
        return {"env": "stance", "body": self.config.body, "config": self.config.to_dict()}

    def default_params(self) -> StanceParams:
        """Model, data template and reference tables on the device; amplitude 0."""
        tables = _reference_tables(self.index, self.config, self.stand_height, self.stance_height)
        return StanceParams(
            model=physics.put_model(self.mj_model, self.physics),
            template=physics.make_data(self.mj_model, self.physics),
            tables=jnp.asarray(tables),
            amplitude=jnp.zeros((), jnp.float32),
        )

    def reset(self, params: StanceParams, key: jax.Array) -> State:
        """The reference pose at the current amplitude with a little noise, at a random rhythm phase."""
        idx = self.index
        key, k_noise, k_phase, k_shove = jax.random.split(key, 4)
        amp = params.amplitude
        joints = jnp.asarray(idx.stand_ctrl) + amp * jnp.asarray(idx.stance_ctrl - idx.stand_ctrl)
        noise = self.config.init_noise_rad
        joints = joints + jax.random.uniform(k_noise, joints.shape, jnp.float32, -noise, noise)
        root = jnp.asarray(idx.stand_qpos[:7]) + amp * jnp.asarray(idx.stance_qpos[:7] - idx.stand_qpos[:7])
        root = root.at[3:7].set(root[3:7] / jnp.linalg.norm(root[3:7]))
        qpos = params.template.qpos.at[self.root_q : self.root_q + 7].set(root)
        qpos = qpos.at[idx.act_qpos_adr].set(joints)
        data = params.template.replace(qpos=qpos, qvel=jnp.zeros_like(params.template.qvel), ctrl=joints)
        info = StanceInfo(
            step=jnp.zeros((), jnp.int32),
            phase=jax.random.randint(k_phase, (), 0, self.rhythm_steps),
            next_shove=jax.random.randint(k_shove, (), *self.shove_steps),
            prev_action=jnp.zeros((self.action_size,), jnp.float32),
            key=key,
        )
        row = params.tables[info.phase]
        zero = jnp.zeros((), jnp.float32)
        obs = self._observe(data, row, amp, info.phase, info.prev_action, jnp.zeros((2,), jnp.float32))
        return State(
            data=data,
            obs=obs,
            reward=zero,
            done=zero,
            truncation=zero,
            metrics=self._zero_metrics(),
            info=info,
        )

    def step(self, params: StanceParams, state: State, action: jax.Array) -> State:
        """Apply the action around the reference, maybe shove, step the physics, score the result."""
        info, idx, cfg = state.info, self.index, self.config
        phase = (info.phase + 1) % self.rhythm_steps
        row = params.tables[phase]  # the one reference lookup of this step
        ref_pose, ref_height = self._reference(row, params.amplitude)
        per_actuator = action[jnp.asarray(idx.action_group)]
        lo, hi = jnp.asarray(idx.ctrl_range[:, 0]), jnp.asarray(idx.ctrl_range[:, 1])
        ctrl = jnp.clip(ref_pose + cfg.action_scale_rad * per_actuator, lo, hi)
        key, k_dir, k_speed, k_next = jax.random.split(info.key, 4)
        shove = info.step == info.next_shove
        kick = self._shove_velocity(k_dir, k_speed) * shove
        qvel = state.data.qvel.at[self.root_v : self.root_v + 2].add(kick)
        data = physics.step(params.model, state.data.replace(ctrl=ctrl, qvel=qvel), self.substeps)
        finite = physics.is_finite(data)
        data = data.replace(
            qpos=jnp.where(finite, data.qpos, params.template.qpos), qvel=jnp.where(finite, data.qvel, 0.0)
        )
        touch = data.sensordata[jnp.asarray(idx.touch_sensor_adr)]
        terms, fell = self._score(data, ref_pose, ref_height, touch, action, info.prev_action)
        fell = jnp.maximum(fell, 1.0 - finite.astype(jnp.float32))
        step = info.step + 1
        timeout = (step >= cfg.max_steps).astype(jnp.float32) * (1.0 - fell)
        reward = sum(terms.values()) - cfg.w_fall * fell
        next_shove = jnp.where(
            shove, step + jax.random.randint(k_next, (), *self.shove_steps), info.next_shove
        )
        info = StanceInfo(step=step, phase=phase, next_shove=next_shove, prev_action=action, key=key)
        obs = self._observe(data, row, params.amplitude, phase, action, touch)
        metrics = {f"reward/{k}": v for k, v in terms.items()}
        metrics.update({f"overflow/{k}": v for k, v in physics.overflow_flags(data).items()})
        metrics.update(fall=fell, shove=shove.astype(jnp.float32), nan=1.0 - finite.astype(jnp.float32))
        return State(
            data=data,
            obs=jnp.where(finite, obs, 0.0),
            reward=jnp.where(finite, reward, -cfg.w_fall),
            done=jnp.maximum(fell, timeout),
            truncation=timeout,
            metrics=metrics,
            info=info,
        )

    # -- curriculum -----------------------------------------------------------------------------------
    def init_curriculum(self) -> StanceCurriculum:
        """Level 0 (the plain standing pose), nothing counted yet."""
        z = jnp.zeros((), jnp.float32)
        return StanceCurriculum(
            level=jnp.zeros((), jnp.int32),
            world_steps=z,
            episodes=z,
            falls=z,
            length_sum=z,
            last_fall_rate=jnp.ones((), jnp.float32),
            solved=jnp.zeros((), bool),
        )

    def apply_curriculum(self, params: StanceParams, curriculum: StanceCurriculum) -> StanceParams:
        """Write the amplitude of the current level into the params."""
        return params.replace(amplitude=curriculum.level.astype(jnp.float32) / self.config.levels)

    def update_curriculum(self, curriculum: StanceCurriculum, stats: EpisodeSummary) -> StanceCurriculum:
        """Count this iteration's episodes into the window; judge the window when it is complete.

        A window lasts ``wait_episodes`` episodes per world. When it is over (and at least one
        episode finished in it) its fall rate decides: rise one level when falls are rare, and at
        full amplitude mark the task solved when the solved rule holds. Then a fresh window starts,
        so early falls of a level never block it forever.
        """
        cfg = self.config
        cur = curriculum.replace(
            world_steps=curriculum.world_steps + stats.world_steps,
            episodes=curriculum.episodes + stats.episodes,
            falls=curriculum.falls + stats.terminated,
            length_sum=curriculum.length_sum + stats.length_sum,
        )
        episodes = jnp.maximum(cur.episodes, 1.0)
        fall_rate = cur.falls / episodes
        judged = (cur.world_steps >= cfg.wait_episodes * cfg.max_steps) & (cur.episodes > 0)
        at_full = cur.level >= cfg.levels
        rise = judged & ~at_full & (fall_rate <= cfg.rise_max_fall_rate)
        meets_rule = (fall_rate <= cfg.solved_max_fall_rate) & (
            cur.length_sum / episodes >= cfg.solved_min_length_fraction * cfg.max_steps
        )
        solved = cur.solved | (judged & at_full & meets_rule)
        fresh = self.init_curriculum().replace(
            level=cur.level + rise.astype(jnp.int32), last_fall_rate=fall_rate, solved=solved
        )
        return jax.tree.map(lambda a, b: jnp.where(judged, a, b), fresh, cur.replace(solved=solved))

    def solved(self, curriculum: StanceCurriculum, stats: EpisodeSummary) -> jax.Array:
        """Whether a judged window at full amplitude had falls <= 5 % and full-length episodes."""
        return curriculum.solved

    # -- pieces ---------------------------------------------------------------------------------------
    def _reference(self, row: jax.Array, amplitude: jax.Array) -> tuple[jax.Array, jax.Array]:
        nu = self.nu
        stand, stance, heights = row[:nu], row[nu : 2 * nu], row[2 * nu :]
        return stand + amplitude * (stance - stand), heights[0] + amplitude * (heights[1] - heights[0])

    def _shove_velocity(self, k_dir: jax.Array, k_speed: jax.Array) -> jax.Array:
        angle = jax.random.uniform(k_dir, (), jnp.float32, 0.0, 2.0 * jnp.pi)
        speed = jax.random.uniform(k_speed, (), jnp.float32, *self.config.shove_speed_mps)
        return speed * jnp.stack([jnp.cos(angle), jnp.sin(angle)])

    def _observe(self, data, row, amplitude, phase, prev_action, touch) -> jax.Array:
        idx = self.index
        ref_pose, ref_height = self._reference(row, amplitude)
        quat = data.qpos[self.root_q + 3 : self.root_q + 7]
        lin_vel = rewards.quat_rotate_inverse(quat, data.qvel[self.root_v : self.root_v + 3])
        angle = 2.0 * jnp.pi * phase.astype(jnp.float32) / self.rhythm_steps
        parts = [
            data.qpos[jnp.asarray(idx.act_qpos_adr)],
            0.1 * data.qvel[jnp.asarray(idx.act_dof_adr)],
            ref_pose,
            data.qpos[jnp.asarray(idx.act_qpos_adr)] - ref_pose,
            jnp.stack([data.qpos[self.root_q + 2] - ref_height]),
            rewards.gravity_in_frame(quat),
            lin_vel,
            0.25 * data.qvel[self.root_v + 3 : self.root_v + 6],
            touch / self.body_weight_n,
            jnp.stack([jnp.sin(angle), jnp.cos(angle), amplitude]),
            prev_action,
        ]
        return jnp.concatenate([jnp.asarray(p, jnp.float32).reshape(-1) for p in parts])

    def _score(self, data, ref_pose, ref_height, touch, action, prev_action):
        cfg, idx = self.config, self.index
        quat = data.qpos[self.root_q + 3 : self.root_q + 7]
        gravity = rewards.gravity_in_frame(quat)
        height = data.qpos[self.root_q + 2]
        joints = data.qpos[jnp.asarray(idx.act_qpos_adr)]
        terms = {
            "alive": jnp.float32(cfg.w_alive),
            "pose": cfg.w_pose * rewards.pose_tracking(joints, ref_pose, 0.05 * self.nu),
            "height": cfg.w_height * rewards.height_tracking(height, ref_height, 0.01),
            "upright": cfg.w_upright * rewards.upright(gravity),
            "feet": cfg.w_feet * rewards.feet_support(touch, self.body_weight_n),
            "action_rate": -cfg.w_action_rate * rewards.action_rate(action, prev_action),
            "root_speed": -cfg.w_root_speed * rewards.root_velocity(data.qvel[self.root_v : self.root_v + 3]),
        }
        fell = (height < cfg.fall_height_fraction * ref_height) | (
            rewards.upright(gravity) < cfg.fall_upright_cos
        )
        return {k: jnp.asarray(v, jnp.float32) for k, v in terms.items()}, fell.astype(jnp.float32)

    def _zero_metrics(self) -> dict[str, jax.Array]:
        names = ["alive", "pose", "height", "upright", "feet", "action_rate", "root_speed"]
        metrics = {f"reward/{k}": jnp.zeros((), jnp.float32) for k in names}
        metrics.update({f"overflow/{k}": jnp.zeros((), jnp.float32) for k in physics.OVERFLOW_BITS})
        metrics.update(fall=jnp.zeros(()), shove=jnp.zeros(()), nan=jnp.zeros(()))
        return {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}
