"""Block: stand in the guard while an opponent throws recorded punches; see him through delayed vision.

Two fighters of the same body face each other at the punch library's distance, both starting in the
`stance` guard. Ours is driven by the policy (PD targets around the guard). The opponent replays the
punch library (`boxjax.envs.punches`) through his PD actuators: his joint targets (ctrl) follow the
sampled punch at the control rate, his arms are gravity-compensated with his own bias force from the
previous step (`qfrc_applied`) so they land where the punch was solved, and his root is held
kinematically in place (pose reset, velocity zeroed, every control step) so he never falls or walks.
Between punches he waits in the guard for a random gap; every punch is sampled on the device.

Our fighter sees the opponent only through `boxjax.envs.vision` (32 points, hidden behind our gloves,
0.1 s late). A punch *arrives* `arrival_lag_s` after its commanded impact frame (the PD arm trails
its targets); it is scored then with `boxjax.envs.scoring` (0 when the glove stopped more than
`reach_m` short of the target): a score up to `block_max_score` is a block, above it a hit.

Per-step metrics (averaged over worlds and steps by the rollout, read once per iteration):
``punch/thrown``, ``punch/arrived``, ``punch/blocked``, ``punch/hit``, ``punch/hit_score`` (the score of
hits, else 0), ``vision/hidden`` (share of hidden points), ``fall``, ``nan``, ``reward/*``, ``overflow/*``.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct
from mujoco import mjx

from boxjax import mjcf
from boxjax.envs import punches, rewards, scoring, vision
from boxjax.envs.base import State
from boxjax.physics import mjx as physics

REWARD_TERMS = ("alive", "pose", "height", "upright", "feet", "action_rate", "block", "hit")
EVENTS = ("punch/thrown", "punch/arrived", "punch/blocked", "punch/hit", "punch/hit_score", "vision/hidden")


@dataclasses.dataclass(frozen=True)
class BlockConfig:
    """Task settings of the block environment."""

    body: str = "simple"
    """Boxer body of both fighters: one of `boxjax.mjcf.BODIES`."""
    control_dt_s: float = 0.025
    """Seconds between policy actions (a multiple of the physics timestep)."""
    episode_s: float = 10.0
    """Episode length in seconds (the time limit)."""
    action_scale_rad: float = 0.4
    """Joint-target offset from the guard for an action of 1."""
    init_noise_rad: float = 0.02
    """Uniform noise on our initial joint angles."""
    punch_library: str = ""
    """Punch library file; empty for the one shipped with the package."""
    punch_gap_s: tuple[float, float] = (0.3, 1.0)
    """Range of the random time the opponent waits in the guard before each punch."""
    vision_delay_s: float = 0.1
    """Age of the vision frame the policy sees."""
    arrival_lag_s: float = 0.05
    """A punch is scored this long after its commanded impact frame (the PD arm's lag)."""
    reach_m: float = 0.1
    """A punch whose glove stops farther than this from the target's surface scores 0."""
    block_max_score: float = 0.25
    """An arriving punch scoring at most this is a block; above it, a hit."""
    fall_height_fraction: float = 0.65
    """A fall: root below this fraction of its guard height..."""
    fall_upright_cos: float = 0.5
    """...or the pelvis tilted past arccos of this."""
    w_alive: float = 1.0
    """Per-step survival bonus."""
    w_pose: float = 0.5
    """Weight of staying near the guard pose."""
    w_height: float = 0.3
    """Weight of keeping the guard's root height."""
    w_upright: float = 0.3
    """Weight of keeping the pelvis upright."""
    w_feet: float = 0.2
    """Weight of carrying the weight on both feet."""
    w_action_rate: float = 0.1
    """Penalty weight on action changes."""
    w_block: float = 2.0
    """Bonus for each blocked punch."""
    w_hit: float = 5.0
    """Penalty per arriving punch, times its score."""
    w_fall: float = 10.0
    """Penalty on the step that falls."""

    def __post_init__(self) -> None:
        """Reject unknown bodies and bad values with the valid choices named."""
        if self.body not in mjcf.BODIES:
            raise ValueError(f"unknown body {self.body!r}; valid: {', '.join(mjcf.BODIES)}")
        if self.control_dt_s <= 0 or self.episode_s <= 0:
            raise ValueError("BlockConfig: control_dt_s and episode_s must be positive")
        if not 0 <= self.punch_gap_s[0] <= self.punch_gap_s[1]:
            raise ValueError("BlockConfig: punch_gap_s must be (low, high) with 0 <= low <= high")
        if self.vision_delay_s < 0 or self.arrival_lag_s < 0 or self.reach_m < 0:
            raise ValueError("BlockConfig: vision_delay_s, arrival_lag_s and reach_m must be >= 0")

    @property
    def max_steps(self) -> int:
        """Control steps per episode."""
        return int(round(self.episode_s / self.control_dt_s))

    def to_dict(self) -> dict:
        """JSON-friendly copy."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


@struct.dataclass
class BlockParams:
    """Everything a block step reads that is not static (passed in, never closed over)."""

    model: mjx.Model
    template: mjx.Data
    """One world in the guard: both fighters placed, PD targets of the guard."""
    punches: punches.PunchTable
    guard_vision: jax.Array
    """(FRAME_SIZE,) what our fighter sees in the guard: the vision frames before the first step."""


@struct.dataclass
class BlockInfo:
    """Per-world task state."""

    step: jax.Array
    """() int32 control steps since reset."""
    punch: jax.Array
    """() int32 the opponent's current (or next) punch."""
    frame: jax.Array
    """() int32 control step within that punch; negative while he waits in the guard."""
    prev_action: jax.Array
    """(action_size,) the last action (for the action-rate penalty and the observation)."""
    vision: jax.Array
    """(max(delay_steps, 1), FRAME_SIZE) ring buffer of vision frames."""
    slot: jax.Array
    """() int32 the buffer's oldest frame."""
    key: jax.Array
    """PRNG key of this world (punch sampling)."""


def advance_punch(table: punches.PunchTable, punch, frame, key, gap_steps: tuple[int, int]):
    """The opponent's punch clock one control step on: (punch, frame).

    A finished punch is followed by a new one sampled uniformly from the table, after a gap drawn
    uniformly from `gap_steps` (inclusive) during which `frame` counts up from minus the gap.
    """
    k_punch, k_gap = jax.random.split(key)
    frame = frame + 1
    over = frame >= table.length[punch]
    new_punch = jax.random.randint(k_punch, (), 0, table.length.shape[0])
    gap = jax.random.randint(k_gap, (), gap_steps[0], gap_steps[1] + 1)
    return jnp.where(over, new_punch, punch), jnp.where(over, -gap, frame)


class BlockEnv:
    """The block task (see the module docstring)."""

    def __init__(
        self, config: BlockConfig = BlockConfig(), physics_config: physics.PhysicsConfig | None = None
    ):
        self.config = config
        self.mj_model, arena = mjcf.build(config.body, opponent=True)
        self.me, self.opponent = arena.red, arena.blue
        budget = mjcf.PAIR_BUDGET[config.body]
        self.physics = physics_config or physics.PhysicsConfig(
            contacts_per_world=budget.ncon_per_world, njmax=budget.njmax
        )
        self.substeps = int(round(config.control_dt_s / self.mj_model.opt.timestep))
        if not math.isclose(self.substeps * self.mj_model.opt.timestep, config.control_dt_s, rel_tol=1e-6):
            raise ValueError(
                f"control_dt_s {config.control_dt_s} is not a multiple of the physics timestep "
                f"{self.mj_model.opt.timestep}"
            )
        lib = punches.load(config.punch_library or None, body=config.body)
        self.library = punches.resample(lib, 1.0 / config.control_dt_s)
        self.guard_qpos = punches.place_opponent(
            self.mj_model.key_qpos[arena.keyframes["stance"]], self.opponent, lib.distance_m
        ).astype(np.float32)
        self.vision_index = vision.vision_index(self.mj_model, self.me, self.opponent)
        self.delay_steps = vision.delay_steps(config.vision_delay_s, config.control_dt_s)
        self.lag_steps = int(round(config.arrival_lag_s / config.control_dt_s))
        self.gap_steps = tuple(int(round(s / config.control_dt_s)) for s in config.punch_gap_s)
        self.blockers = vision.capsule_index(
            self.mj_model, np.concatenate([self.me.glove_geom_ids, self.me.forearm_geom_ids])
        )
        self.targets = vision.capsule_index(
            self.mj_model, [self.me.head_geom_id, self.mj_model.geom(self.me.prefix + "chest").id]
        )
        self.opponent_gloves = vision.capsule_index(self.mj_model, self.opponent.glove_geom_ids)
        self.nu = int(self.me.act_qpos_adr.shape[0])
        self.action_size = int(self.me.action_size)
        self.observation_size = 2 * self.nu + 12 + self.action_size + vision.FRAME_SIZE
        self.body_weight_n = float(
            self.mj_model.body_subtreemass[self.me.pelvis_body] * -self.mj_model.opt.gravity[2]
        )
        self.guard_height = float(self.me.stance_qpos[2])

    # -- protocol -------------------------------------------------------------------------------------
    def describe(self) -> dict:
        """What a checkpoint records about this environment."""
        return {"env": "block", "body": self.config.body, "config": self.config.to_dict()}

    def default_params(self) -> BlockParams:
        """Model, guard template and punch table on the device."""
        template = physics.make_data(self.mj_model, self.physics)
        ctrl = np.zeros(self.mj_model.nu, np.float32)
        ctrl[self.me.actuator_ids] = self.me.stance_ctrl
        ctrl[self.opponent.actuator_ids] = self.opponent.stance_ctrl
        names = [
            self.mj_model.actuator(a).name[len(self.opponent.prefix) :] for a in self.opponent.actuator_ids
        ]
        guard = mujoco.MjData(self.mj_model)
        guard.qpos[:] = self.guard_qpos
        mujoco.mj_kinematics(self.mj_model, guard)
        return BlockParams(
            model=physics.put_model(self.mj_model, self.physics),
            template=template.replace(qpos=jnp.asarray(self.guard_qpos), ctrl=jnp.asarray(ctrl)),
            punches=punches.device_table(self.library, self.opponent, names),
            guard_vision=jnp.asarray(vision.see(guard, self.vision_index), jnp.float32),
        )

    def reset(self, params: BlockParams, key: jax.Array) -> State:
        """Both fighters in the guard (ours with a little noise); the opponent's first punch is drawn.

        The vision buffer starts full of the guard's frame (seen without the noise, which moves our
        gloves by millimetres), so a reset needs no kinematics pass.
        """
        me, cfg = self.me, self.config
        key, k_noise, k_punch, k_gap = jax.random.split(key, 4)
        adr = jnp.asarray(me.act_qpos_adr)
        noise = jax.random.uniform(k_noise, (self.nu,), jnp.float32, -cfg.init_noise_rad, cfg.init_noise_rad)
        t = params.template
        data = t.replace(qpos=t.qpos.at[adr].add(noise), qvel=jnp.zeros_like(t.qvel))
        info = BlockInfo(
            step=jnp.zeros((), jnp.int32),
            punch=jax.random.randint(k_punch, (), 0, params.punches.length.shape[0]),
            frame=-jax.random.randint(k_gap, (), self.gap_steps[0], self.gap_steps[1] + 1),
            prev_action=jnp.zeros((self.action_size,), jnp.float32),
            vision=vision.delay_init(params.guard_vision, self.delay_steps),
            slot=jnp.zeros((), jnp.int32),
            key=key,
        )
        zero = jnp.zeros((), jnp.float32)
        touch = jnp.zeros((2,), jnp.float32)
        return State(
            data=data,
            obs=self._observe(data, info.prev_action, touch, params.guard_vision),
            reward=zero,
            done=zero,
            truncation=zero,
            metrics=self._zero_metrics(),
            info=info,
        )

    def step(self, params: BlockParams, state: State, action: jax.Array) -> State:
        """Advance the opponent's punch, apply our action, step the physics, see, score."""
        info, cfg, table = state.info, self.config, params.punches
        key, k_punch = jax.random.split(info.key)
        punch, frame = advance_punch(table, info.punch, info.frame, k_punch, self.gap_steps)
        data = self._drive(params, state.data, action, table.ctrl[punch, jnp.maximum(frame, 0)])
        data = physics.step(params.model, data, self.substeps)
        finite = physics.is_finite(data)
        data = data.replace(
            qpos=jnp.where(finite, data.qpos, params.template.qpos), qvel=jnp.where(finite, data.qvel, 0.0)
        )
        seen = self._see(data)
        buffer, slot, delayed = vision.delay_push(info.vision, info.slot, seen, self.delay_steps)
        score = self._score(data, table.hand[punch], table.target[punch])
        events = self._punch_events(table, punch, frame, score)
        touch = data.sensordata[jnp.asarray(self.me.touch_sensor_adr)]
        terms, fell = self._rewards(data, touch, action, info.prev_action)
        terms.update(
            block=cfg.w_block * events["punch/blocked"], hit=-cfg.w_hit * events["punch/arrived"] * score
        )
        fell = jnp.maximum(fell, 1.0 - finite.astype(jnp.float32))
        step = info.step + 1
        timeout = (step >= cfg.max_steps).astype(jnp.float32) * (1.0 - fell)
        reward = sum(terms.values()) - cfg.w_fall * fell
        info = BlockInfo(
            step=step, punch=punch, frame=frame, prev_action=action, vision=buffer, slot=slot, key=key
        )
        metrics = {f"reward/{k}": jnp.asarray(v, jnp.float32) for k, v in terms.items()}
        metrics.update({f"overflow/{k}": v for k, v in physics.overflow_flags(data).items()})
        metrics.update(events)
        metrics.update(
            {
                "vision/hidden": 1.0 - jnp.mean(seen[3::4]),
                "fall": fell,
                "nan": 1.0 - finite.astype(jnp.float32),
            }
        )
        return State(
            data=data,
            obs=jnp.where(finite, self._observe(data, action, touch, delayed), 0.0),
            reward=jnp.where(finite, reward, -cfg.w_fall),
            done=jnp.maximum(fell, timeout),
            truncation=timeout,
            metrics=metrics,
            info=info,
        )

    # -- pieces ---------------------------------------------------------------------------------------
    def _drive(self, params: BlockParams, data: mjx.Data, action: jax.Array, opponent_ctrl: jax.Array):
        """Our PD targets from the action, the opponent's from his punch, his root held in place."""
        me, opp = self.me, self.opponent
        lo, hi = jnp.asarray(me.ctrl_range[:, 0]), jnp.asarray(me.ctrl_range[:, 1])
        ours = jnp.clip(
            jnp.asarray(me.stance_ctrl) + self.config.action_scale_rad * action[jnp.asarray(me.action_group)],
            lo,
            hi,
        )
        ctrl = data.ctrl.at[jnp.asarray(me.actuator_ids)].set(ours)
        ctrl = ctrl.at[jnp.asarray(opp.actuator_ids)].set(opponent_ctrl)
        root_q = slice(opp.qpos_adr, opp.qpos_adr + 7)
        root_v = slice(opp.dof_adr, opp.dof_adr + 6)
        qpos = data.qpos.at[root_q].set(params.template.qpos[root_q])
        qvel = data.qvel.at[root_v].set(0.0)
        hinges = slice(opp.dof_adr + 6, opp.dof_adr + opp.nv)
        applied = jnp.zeros_like(data.qfrc_applied).at[hinges].set(data.qfrc_bias[hinges])
        return data.replace(ctrl=ctrl, qpos=qpos, qvel=qvel, qfrc_applied=applied)

    def _punch_events(self, table: punches.PunchTable, punch, frame, score) -> dict[str, jax.Array]:
        """() float32 flags of this step: thrown, arrived, blocked, hit, and the score of a hit."""
        arrival = jnp.minimum(table.impact[punch] + self.lag_steps, table.length[punch] - 1)
        arrived = (frame == arrival).astype(jnp.float32)
        hit = arrived * (score > self.config.block_max_score)
        return {
            "punch/thrown": (frame == 0).astype(jnp.float32),
            "punch/arrived": arrived,
            "punch/blocked": arrived - hit,
            "punch/hit": hit,
            "punch/hit_score": hit * score,
        }

    def _see(self, data: mjx.Data) -> jax.Array:
        """(FRAME_SIZE,) what our fighter sees now (`vision.see`)."""
        return vision.see(data, self.vision_index)

    def _score(self, data: mjx.Data, hand: jax.Array, target: jax.Array) -> jax.Array:
        """() score of the opponent's `hand` glove against our `target` right now (0 when out of reach)."""
        gloves = vision.pose_capsules(data.geom_xpos, data.geom_xmat, self.opponent_gloves)
        goals = vision.pose_capsules(data.geom_xpos, data.geom_xmat, self.targets)
        glove, glove_r = gloves.start[hand], gloves.radius[hand]
        goal, goal_r = goals.start[target], goals.radius[target]
        blockers = vision.pose_capsules(data.geom_xpos, data.geom_xmat, self.blockers)
        clear = scoring.punch_score(glove, goal, goal_r, blockers)
        gap = jnp.linalg.norm(goal - glove) - glove_r - goal_r
        return clear * (gap <= self.config.reach_m)

    def _observe(self, data: mjx.Data, prev_action, touch, seen) -> jax.Array:
        me = self.me
        root_q, root_v = me.qpos_adr, me.dof_adr
        quat = data.qpos[root_q + 3 : root_q + 7]
        parts = [
            data.qpos[jnp.asarray(me.act_qpos_adr)],
            0.1 * data.qvel[jnp.asarray(me.act_dof_adr)],
            jnp.stack([data.qpos[root_q + 2] - self.guard_height]),
            rewards.gravity_in_frame(quat),
            rewards.quat_rotate_inverse(quat, data.qvel[root_v : root_v + 3]),
            0.25 * data.qvel[root_v + 3 : root_v + 6],
            touch / self.body_weight_n,
            prev_action,
            seen,
        ]
        return jnp.concatenate([jnp.asarray(p, jnp.float32).reshape(-1) for p in parts])

    def _rewards(self, data, touch, action, prev_action):
        cfg, me = self.config, self.me
        quat = data.qpos[me.qpos_adr + 3 : me.qpos_adr + 7]
        gravity = rewards.gravity_in_frame(quat)
        height = data.qpos[me.qpos_adr + 2]
        joints = data.qpos[jnp.asarray(me.act_qpos_adr)]
        terms = {
            "alive": jnp.float32(cfg.w_alive),
            "pose": cfg.w_pose * rewards.pose_tracking(joints, jnp.asarray(me.stance_ctrl), 0.05 * self.nu),
            "height": cfg.w_height * rewards.height_tracking(height, self.guard_height, 0.01),
            "upright": cfg.w_upright * rewards.upright(gravity),
            "feet": cfg.w_feet * rewards.feet_support(touch, self.body_weight_n),
            "action_rate": -cfg.w_action_rate * rewards.action_rate(action, prev_action),
        }
        fell = (height < cfg.fall_height_fraction * self.guard_height) | (
            rewards.upright(gravity) < cfg.fall_upright_cos
        )
        return terms, fell.astype(jnp.float32)

    def _zero_metrics(self) -> dict[str, jax.Array]:
        names = [f"reward/{k}" for k in REWARD_TERMS] + [f"overflow/{k}" for k in physics.OVERFLOW_BITS]
        names += [*EVENTS, "fall", "nan"]
        return {k: jnp.zeros((), jnp.float32) for k in names}
