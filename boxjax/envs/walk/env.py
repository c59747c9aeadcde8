"""Walk: follow a velocity command (forward, lateral, yaw rate) from the boxing guard; the walking teacher.

Each episode draws one command in the fighter's heading frame (a share of them zero: stand still). The
policy sets PD targets around the `stance` guard exactly as the stance and block tasks do, so a trained
walker's leg actions mean the same thing there and can teach them (`boxjax.envs.walk.teacher`).

The observation is `walk_observation`, a pure function of ONE fighter's physics state and the command
(no previous action, nothing task-specific), so the two-fighter block task can compute it for its own
fighter and ask the teacher what its legs would do. The heading frame turns with the pelvis about the
vertical; its forward axis is where the fighter faces (in the keyframes, towards the opponent): the pelvis
heading less the hip turn of the guard (`heading`).

Per-step metrics: ``reward/*``, ``walk/lin_error`` (m/s), ``walk/yaw_error`` (rad/s), ``walk/speed``
(m/s), ``fall``, ``shove``, ``nan``, ``overflow/*``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct
from mujoco import mjx

from boxjax import mjcf
from boxjax.envs import base, frames, rewards
from boxjax.envs.base import State, TaskConfig
from boxjax.mjcf import poses
from boxjax.physics import backend as physics_backend
from boxjax.ranges import COSINE, NON_NEGATIVE, POSITIVE, UNIT, Range

TERMS = ("track_lin", "track_yaw", "alive", "upright", "height", "guard", "action_rate")
"""Reward terms, in the order they are summed."""
LEG_JOINTS = ("hip", "knee", "ankle", "toe")
"""Actuator name stems (after the fighter prefix) that make up the legs."""
TOUCH_SCALE_N = 300.0
"""Foot touch forces enter the observation as tanh(force / this): body-independent, saturating."""
GUARD_PELVIS_YAW = float(poses.POSES["stance"].yaw)
"""How far the pelvis is turned from the facing direction in the guard (rad; the hips are turned)."""
EXTRA_OBS = 15
"""Observation features besides the 2 nu joint features (height 1, gravity 3, velocity 3, angular
velocity 3, touch 2, command 3)."""


WEIGHTS = (
    "w_track_lin", "w_track_yaw", "w_alive", "w_upright", "w_height", "w_guard", "w_action_rate", "w_fall",
)  # fmt: skip
"""The reward weights of `WalkConfig`."""


@dataclasses.dataclass(frozen=True)
class WalkConfig(TaskConfig):
    """Task settings of the walk environment."""

    action_scale_rad: float = 0.4
    """Joint-target offset from the guard for an action of 1 (as in stance and block)."""
    init_noise_rad: float = 0.02
    """Uniform noise on the initial joint angles."""
    forward_mps: tuple[float, float] = (-0.5, 1.0)
    """Range of the forward speed command."""
    lateral_mps: tuple[float, float] = (-0.4, 0.4)
    """Range of the sideways speed command (+ = left)."""
    yaw_radps: tuple[float, float] = (-1.0, 1.0)
    """Range of the turn-rate command (+ = counter-clockwise)."""
    zero_command_share: float = 0.2
    """Share of episodes whose command is zero (stand still in the guard)."""
    shoves: bool = True
    """Kick the root now and then (recovering while walking)."""
    shove_interval_s: tuple[float, float] = (2.0, 5.0)
    """Range of the random time between shoves."""
    shove_speed_mps: tuple[float, float] = (0.1, 0.5)
    """Range of the horizontal root-velocity kick of a shove."""
    fall_height_fraction: float = 0.65
    """A fall: root below this fraction of its guard height..."""
    fall_upright_cos: float = 0.5
    """...or the pelvis tilted past arccos of this."""
    tracking_sigma: float = 0.25
    """Squared error (m^2/s^2, rad^2/s^2) at which a tracking term has fallen to 1/e."""
    w_track_lin: float = 1.5
    """Weight of tracking the commanded horizontal velocity."""
    w_track_yaw: float = 0.75
    """Weight of tracking the commanded turn rate."""
    w_alive: float = 0.5
    """Per-step survival bonus."""
    w_upright: float = 0.5
    """Weight of keeping the pelvis upright."""
    w_height: float = 0.3
    """Weight of keeping the guard's root height."""
    w_guard: float = 0.3
    """Weight of keeping the upper body (every non-leg joint) in the guard pose."""
    w_action_rate: float = 0.1
    """Penalty weight on action changes."""
    w_fall: float = 10.0
    """Penalty on the step that falls."""

    RANGES = {
        "action_scale_rad": POSITIVE,
        "init_noise_rad": NON_NEGATIVE,
        "forward_mps": Range(pair=True),
        "lateral_mps": Range(pair=True),
        "yaw_radps": Range(pair=True),
        "zero_command_share": UNIT,
        "shove_interval_s": Range(0.0, open_low=True, pair=True),
        "shove_speed_mps": Range(0.0, pair=True),
        "fall_height_fraction": UNIT,
        "fall_upright_cos": COSINE,
        "tracking_sigma": POSITIVE,
        **{name: NON_NEGATIVE for name in WEIGHTS},
    }


@struct.dataclass
class WalkParams:
    """Everything a walk step reads that is not static (passed in, never closed over)."""

    model: Any
    """The physics backend's model (`Backend.put_model`; None on MuJoCo's C engine)."""
    template: Any
    """One world in the guard, PD targets of the guard."""


@struct.dataclass
class WalkInfo:
    """Per-world task state."""

    step: jax.Array
    """() int32 control steps since reset."""
    command: jax.Array
    """(3,) float32 forward m/s, lateral m/s, yaw rad/s in the heading frame."""
    next_shove: jax.Array
    """() int32 control step of the next shove."""
    prev_action: jax.Array
    """(action_size,) the last action (for the action-rate penalty only; not observed)."""
    key: jax.Array


# -- the observation, shared with other tasks ---------------------------------------------------------
def heading(index: mjcf.FighterIndex, qpos: jax.Array) -> jax.Array:
    """() float32 the world direction (rad about +z, 0 = +x) the fighter faces: its pelvis yaw less the
    pelvis turn of the guard (the `stance` pose's), so both fighters of a keyframe face each other."""
    quat = qpos[index.qpos_adr + 3 : index.qpos_adr + 7]
    return (frames.yaw(quat) - GUARD_PELVIS_YAW).astype(jnp.float32)


def root_velocity(index: mjcf.FighterIndex, data: mjx.Data) -> tuple[jax.Array, jax.Array]:
    """Root linear velocity (3,) in the heading frame and the world yaw rate () in rad/s."""
    quat = data.qpos[index.qpos_adr + 3 : index.qpos_adr + 7]
    v = index.dof_adr
    linear = frames.to_heading_frame(heading(index, data.qpos), data.qvel[v : v + 3])
    conjugate = quat * jnp.asarray([1.0, -1.0, -1.0, -1.0], quat.dtype)
    angular_world = rewards.quat_rotate_inverse(conjugate, data.qvel[v + 3 : v + 6])
    return linear, angular_world[2]


def walk_observation_size(index: mjcf.FighterIndex) -> int:
    """Length of `walk_observation` for this fighter's body."""
    return 2 * int(index.act_qpos_adr.shape[0]) + EXTRA_OBS


def walk_observation(index: mjcf.FighterIndex, data: mjx.Data, command: jax.Array) -> jax.Array:
    """What the walker sees of one fighter (any fighter of any arena), float32.

    Args:
      index: the fighter (e.g. `arena.red`, or `arena.blue` of a two-fighter arena).
      data: one world's physics state (leaves without a batch axis; vmap for many).
      command: (3,) forward m/s, lateral m/s, yaw rad/s in the fighter's heading frame.

    Returns:
      (2 nu + 15,) joint angles minus the guard (nu), 0.1 x joint velocities (nu), root height minus the
      guard's (1), gravity in the pelvis frame (3), root velocity in the heading frame (3), 0.25 x pelvis
      angular velocity in its own frame (3), tanh(foot touch / 300 N) (2), the command (3).
    """
    q, v = index.qpos_adr, index.dof_adr
    quat = data.qpos[q + 3 : q + 7]
    linear, _ = root_velocity(index, data)
    touch = data.sensordata[jnp.asarray(index.touch_sensor_adr)]
    parts = [
        data.qpos[jnp.asarray(index.act_qpos_adr)] - jnp.asarray(index.stance_ctrl),
        0.1 * data.qvel[jnp.asarray(index.act_dof_adr)],
        jnp.reshape(data.qpos[q + 2] - float(index.stance_qpos[2]), (1,)),
        rewards.gravity_in_frame(quat),
        linear,
        0.25 * data.qvel[v + 3 : v + 6],
        jnp.tanh(touch / TOUCH_SCALE_N),
        command,
    ]
    return jnp.concatenate([jnp.asarray(p, jnp.float32) for p in parts])


def leg_action_mask(model: mujoco.MjModel, index: mjcf.FighterIndex) -> np.ndarray:
    """(action_size,) float32: 1 for action dims that drive a leg joint (hips, knees, ankles, toes)."""
    mask = np.zeros(int(index.action_size), np.float32)
    for actuator, dim in zip(index.actuator_ids, index.action_group, strict=True):
        name = model.actuator(int(actuator)).name[len(index.prefix) :]
        if name.startswith(LEG_JOINTS):
            mask[dim] = 1.0
    return mask


# -- reward terms (each one tiny and named) ---------------------------------------------------------
def velocity_tracking(velocity_xy: jax.Array, command_xy: jax.Array, sigma: float) -> jax.Array:
    """exp(-|command - velocity|^2 / sigma) over the horizontal velocity (2,): 1 when on command."""
    return jnp.exp(-jnp.sum(jnp.square(command_xy - velocity_xy)) / sigma)


def yaw_rate_tracking(yaw_rate: jax.Array, command_yaw: jax.Array, sigma: float) -> jax.Array:
    """exp(-(command - yaw rate)^2 / sigma): 1 when turning as commanded."""
    return jnp.exp(-jnp.square(command_yaw - yaw_rate) / sigma)


def sample_command(config: WalkConfig, key: jax.Array) -> jax.Array:
    """(3,) float32 command drawn uniformly from the config's ranges, or zero with `zero_command_share`."""
    k_zero, k_cmd = jax.random.split(key)
    ranges = np.array([config.forward_mps, config.lateral_mps, config.yaw_radps], np.float32)
    command = jax.random.uniform(k_cmd, (3,), jnp.float32, ranges[:, 0], ranges[:, 1])
    moving = jax.random.uniform(k_zero, (), jnp.float32) >= config.zero_command_share
    return command * moving.astype(jnp.float32)


def control_substeps(model: mujoco.MjModel, control_dt_s: float) -> int:
    """Physics steps per control step; an error when `control_dt_s` is not a multiple of the timestep."""
    substeps = int(round(control_dt_s / model.opt.timestep))
    if not math.isclose(substeps * model.opt.timestep, control_dt_s, rel_tol=1e-6):
        raise ValueError(
            f"control_dt_s {control_dt_s} is not a multiple of the physics timestep {model.opt.timestep}"
        )
    return substeps


@struct.dataclass
class WalkDraws:
    """What `WalkEnv.before_physics` hands to `after_physics` (one world's)."""

    shove: jax.Array
    """() bool whether this step shoved the fighter."""
    key: jax.Array
    """The world's key for the following steps."""
    next_key: jax.Array
    """The key that draws the next shove's time when this step shoved."""


class WalkEnv:
    """The walk task on one boxer body (see the module docstring)."""

    cpu_derived: tuple[str, ...] = ()
    """Derived physics fields `after_physics` reads besides the sensors (`boxjax.envs.cpu`): none."""

    def __init__(self, config: WalkConfig = WalkConfig(), backend: physics_backend.Backend | None = None):
        self.config = config
        self.mj_model, arena = mjcf.build(config.body)
        config.configure_model(self.mj_model)
        self.index = arena.red
        budget = config.contact_budget()
        self.backend = backend or physics_backend.make("jax", budget.ncon_per_world, budget.njmax)
        self.substeps = control_substeps(self.mj_model, config.control_dt_s)
        self.shove_steps = tuple(max(1, int(round(s / config.control_dt_s))) for s in config.shove_interval_s)
        self.nu = int(self.index.act_qpos_adr.shape[0])
        self.action_size = int(self.index.action_size)
        self.observation_size = walk_observation_size(self.index)
        self.leg_mask = leg_action_mask(self.mj_model, self.index)
        self.upper_joints = np.flatnonzero(self.leg_mask[self.index.action_group] == 0.0).astype(np.int32)
        """Actuators of the upper body (the guard term's joints)."""
        self.guard_height = float(self.index.stance_qpos[2])

    # -- protocol -------------------------------------------------------------------------------------
    def describe(self) -> dict:
        """What a checkpoint records about this environment."""
        return {"env": "walk", "body": self.config.body, "config": self.config.to_dict()}

    def default_params(self) -> WalkParams:
        """Model and the guard template on the device."""
        template = self.backend.make_data(self.mj_model)
        qpos = np.asarray(template.qpos, np.float32).copy()
        qpos[self.index.qpos_adr : self.index.qpos_adr + self.index.nq] = self.index.stance_qpos
        ctrl = np.zeros(self.mj_model.nu, np.float32)
        ctrl[self.index.actuator_ids] = self.index.stance_ctrl
        return WalkParams(
            model=self.backend.put_model(self.mj_model),
            template=template.replace(qpos=jnp.asarray(qpos), ctrl=jnp.asarray(ctrl)),
        )

    def reset(self, params: WalkParams, key: jax.Array) -> State:
        """The guard with a little joint noise, standing still; a fresh command."""
        cfg, idx = self.config, self.index
        key, k_noise, k_cmd, k_shove = jax.random.split(key, 4)
        noise = jax.random.uniform(k_noise, (self.nu,), jnp.float32, -cfg.init_noise_rad, cfg.init_noise_rad)
        t = params.template
        data = t.replace(
            qpos=t.qpos.at[jnp.asarray(idx.act_qpos_adr)].add(noise), qvel=jnp.zeros_like(t.qvel)
        )
        info = WalkInfo(
            step=jnp.zeros((), jnp.int32),
            command=sample_command(cfg, k_cmd),
            next_shove=jax.random.randint(k_shove, (), *self.shove_steps),
            prev_action=jnp.zeros((self.action_size,), jnp.float32),
            key=key,
        )
        zero = jnp.zeros((), jnp.float32)
        return State(
            data=data,
            obs=walk_observation(idx, data, info.command),
            reward=zero,
            done=zero,
            truncation=zero,
            metrics=self._zero_metrics(),
            info=info,
        )

    def step(self, params: WalkParams, state: State, action: jax.Array) -> State:
        """One control step: `before_physics` (the action around the guard, maybe a shove), the physics,
        `after_physics` (score the tracking, observe)."""
        data, draws = self.before_physics(params, state, action)
        data = self.backend.step(params.model, data, self.substeps)
        return self.after_physics(params, state, data, action, draws)

    def before_physics(self, params: WalkParams, state: State, action: jax.Array):
        """The step up to the physics: PD targets around the guard, a shove's kick when due. Pure and per
        world, like `step`.

        Returns:
          (physics state to step from, `WalkDraws` for `after_physics`).
        """
        info, cfg, idx = state.info, self.config, self.index
        key, k_dir, k_speed, k_next = jax.random.split(info.key, 4)
        shove = (info.step == info.next_shove) & cfg.shoves
        angle = jax.random.uniform(k_dir, (), jnp.float32, 0.0, 2.0 * jnp.pi)
        speed = jax.random.uniform(k_speed, (), jnp.float32, *cfg.shove_speed_mps)
        kick = speed * jnp.stack([jnp.cos(angle), jnp.sin(angle)]) * shove
        qvel = state.data.qvel.at[idx.dof_adr : idx.dof_adr + 2].add(kick)
        ctrl = state.data.ctrl.at[jnp.asarray(idx.actuator_ids)].set(self._targets(action))
        return state.data.replace(ctrl=ctrl, qvel=qvel), WalkDraws(shove=shove, key=key, next_key=k_next)

    def after_physics(self, params: WalkParams, state: State, data, action: jax.Array, draws: WalkDraws):
        """The step after the physics: guard against NaN, score the tracking, observe. `data` is the
        physics state stepped from `before_physics`' output (an `mjx.Data` or a
        `boxjax.physics.cpu.PhysicsView`). Pure and per world, like `step`."""
        info, cfg, idx = state.info, self.config, self.index
        shove = draws.shove
        data, finite = base.reset_nonfinite(self.backend, data, params.template.qpos)
        terms, fell, figures = self._score(data, info.command, action, info.prev_action)
        nonfinite = 1.0 - finite.astype(jnp.float32)  # reset and ended, but not a fall
        fell = fell * finite
        step = info.step + 1
        timeout = (step >= cfg.max_steps).astype(jnp.float32) * (1.0 - fell)
        reward = sum(terms[k] for k in TERMS) - cfg.w_fall * fell
        next_shove = jnp.where(
            shove, step + jax.random.randint(draws.next_key, (), *self.shove_steps), info.next_shove
        )
        info = info.replace(step=step, next_shove=next_shove, prev_action=action, key=draws.key)
        metrics = {f"reward/{k}": terms[k] for k in TERMS}
        metrics.update(figures)
        metrics.update(self.backend.figures(data))
        metrics.update(fall=fell, shove=shove.astype(jnp.float32), nan=nonfinite)
        metrics = {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}
        obs = walk_observation(idx, data, info.command)
        return base.guarded_state(data, obs, reward.astype(jnp.float32), fell, timeout, finite, metrics, info)

    # -- pieces ---------------------------------------------------------------------------------------
    def _targets(self, action: jax.Array) -> jax.Array:
        """(nu,) PD targets: the guard plus the scaled action, clipped to the control range (as stance)."""
        idx = self.index
        per_actuator = action[jnp.asarray(idx.action_group)]
        target = jnp.asarray(idx.stance_ctrl) + self.config.action_scale_rad * per_actuator
        return jnp.clip(target, jnp.asarray(idx.ctrl_range[:, 0]), jnp.asarray(idx.ctrl_range[:, 1]))

    def _score(self, data: mjx.Data, command, action, prev_action):
        """Weighted terms {name: ()}, the fall flag (), and the tracking figures {name: ()}."""
        cfg, idx = self.config, self.index
        quat = data.qpos[idx.qpos_adr + 3 : idx.qpos_adr + 7]
        gravity = rewards.gravity_in_frame(quat)
        height = data.qpos[idx.qpos_adr + 2]
        upper = jnp.asarray(idx.act_qpos_adr[self.upper_joints])
        guard = jnp.asarray(idx.stance_ctrl[self.upper_joints])
        linear, yaw_rate = root_velocity(idx, data)
        terms = {
            "track_lin": cfg.w_track_lin * velocity_tracking(linear[:2], command[:2], cfg.tracking_sigma),
            "track_yaw": cfg.w_track_yaw * yaw_rate_tracking(yaw_rate, command[2], cfg.tracking_sigma),
            "alive": jnp.float32(cfg.w_alive),
            "upright": cfg.w_upright * rewards.upright(gravity),
            "height": cfg.w_height * rewards.height_tracking(height, self.guard_height, 0.01),
            "guard": cfg.w_guard * rewards.pose_tracking(data.qpos[upper], guard, 0.05 * max(upper.size, 1)),
            "action_rate": -cfg.w_action_rate * rewards.action_rate(action, prev_action),
        }
        fell = (height < cfg.fall_height_fraction * self.guard_height) | (
            rewards.upright(gravity) < cfg.fall_upright_cos
        )
        figures = {
            "walk/lin_error": jnp.linalg.norm(command[:2] - linear[:2]),
            "walk/yaw_error": jnp.abs(command[2] - yaw_rate),
            "walk/speed": jnp.linalg.norm(linear[:2]),
        }
        terms = {k: jnp.asarray(v, jnp.float32) for k, v in terms.items()}
        return terms, fell.astype(jnp.float32), figures

    def _zero_metrics(self) -> dict[str, jax.Array]:
        names = [f"reward/{k}" for k in TERMS] + ["walk/lin_error", "walk/yaw_error", "walk/speed"]
        names += list(self.backend.figure_names) + ["fall", "shove", "nan"]
        return {k: jnp.zeros((), jnp.float32) for k in names}
