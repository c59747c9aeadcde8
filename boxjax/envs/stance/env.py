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
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct

from boxjax import mjcf
from boxjax.envs import base
from boxjax.envs.base import EpisodeSummary, State, TaskConfig
from boxjax.envs.stance import shared as stance_math
from boxjax.physics import backend as physics_backend
from boxjax.ranges import COSINE, COUNT, NON_NEGATIVE, POSITIVE, UNIT, Range

WEIGHTS = (
    "w_alive", "w_pose", "w_height", "w_upright", "w_feet", "w_action_rate", "w_root_speed", "w_fall",
)  # fmt: skip
"""The reward weights of `StanceConfig`."""


@dataclasses.dataclass(frozen=True)
class StanceConfig(TaskConfig):
    """Task settings of the stance environment."""

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

    RANGES = {
        "action_scale_rad": POSITIVE,
        "rhythm_period_s": POSITIVE,
        "rhythm_depth": UNIT,
        "shove_interval_s": Range(0.0, open_low=True, pair=True),
        "shove_speed_mps": Range(0.0, pair=True),
        "init_noise_rad": NON_NEGATIVE,
        "fall_height_fraction": UNIT,
        "fall_upright_cos": COSINE,
        "levels": COUNT,
        "wait_episodes": POSITIVE,
        "rise_max_fall_rate": UNIT,
        "solved_max_fall_rate": UNIT,
        **{name: NON_NEGATIVE for name in WEIGHTS},
    }


@struct.dataclass
class StanceParams:
    """Everything a stance step reads that is not static (passed in, never closed over)."""

    model: Any
    """The physics backend's model (`Backend.put_model`; None on MuJoCo's C engine)."""
    template: Any
    """The backend's one-world state template (`Backend.make_data`)."""
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
    began_full: jax.Array
    """() float32 1.0 when the episode began at full amplitude (only those count toward the solve)."""


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
    """() bool: the solved rule held (`SOLVE_EPISODES`, `SOLVE_FALLS`)."""
    solve_episodes: jax.Array = struct.field(default_factory=lambda: jnp.zeros((), jnp.float32))
    """Episodes begun at full amplitude that ended since the last solve judgement (and their falls)."""
    solve_falls: jax.Array = struct.field(default_factory=lambda: jnp.zeros((), jnp.float32))


@struct.dataclass
class StanceDraws:
    """What `StanceEnv.before_physics` hands to `after_physics` (one world's)."""

    phase: jax.Array
    """() int32 the rhythm step of this control step."""
    shove: jax.Array
    """() bool whether this step shoved the fighter."""
    key: jax.Array
    """The world's key for the following steps."""
    next_key: jax.Array
    """The key that draws the next shove's time when this step shoved."""


def reference_tables(index: mjcf.FighterIndex, config: StanceConfig) -> np.ndarray:
    """(rhythm_steps, 2 * nu + 2) float32: stand pose | stance pose with rhythm | stand, stance height."""
    rows = rhythm_steps(config)
    phase = 2.0 * np.pi * np.arange(rows) / rows
    stand = np.broadcast_to(index.stand_ctrl, (rows, index.stand_ctrl.shape[0]))
    delta = index.stance_ctrl - index.stand_ctrl
    stance = index.stance_ctrl + config.rhythm_depth * np.sin(phase)[:, None] * delta
    heights = np.broadcast_to(np.array([index.stand_qpos[2], index.stance_qpos[2]]), (rows, 2))
    return np.concatenate([stand, stance, heights], axis=1).astype(np.float32)


def init_curriculum() -> StanceCurriculum:
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


SOLVE_EPISODES = "count/solve_episodes"
"""Figure: episodes that began at full amplitude and ended (by a fall or the time limit) this step."""
SOLVE_FALLS = "count/solve_falls"
"""Figure: of those, the ones that ended by a fall (the others lasted the full episode)."""


def curriculum_amplitude(config: StanceConfig, curriculum: StanceCurriculum) -> jax.Array:
    """() float32 stance amplitude of the curriculum's level."""
    return curriculum.level.astype(jnp.float32) / config.levels


def update_curriculum(
    config: StanceConfig, curriculum: StanceCurriculum, stats: EpisodeSummary
) -> StanceCurriculum:
    """Count an iteration's episodes into the window; judge the window when it is complete; judge the
    solve once enough full-amplitude episodes have ended.

    A window lasts ``wait_episodes`` episodes per world. When it is over (and at least one episode
    finished in it) its fall rate decides whether to rise one level; then a fresh window starts, so early
    falls of a level never block it forever. The solve (the seed's rule) is judged apart from the windows,
    on the episodes that *began* at full amplitude (`SOLVE_EPISODES` in the stats' counts): once at least
    one per world has ended, solved when at most `solved_max_fall_rate` of them fell (the others lasted
    the full episode, ended by the time limit); otherwise those counts start again.
    """
    cfg = config
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
    solve_episodes = curriculum.solve_episodes + stats.counts.get(SOLVE_EPISODES, 0.0)
    solve_falls = curriculum.solve_falls + stats.counts.get(SOLVE_FALLS, 0.0)
    enough = (solve_episodes >= jnp.maximum(stats.worlds, 1.0)) & at_full
    solved = cur.solved | (enough & (solve_falls <= cfg.solved_max_fall_rate * solve_episodes))
    solve = dict(
        solved=solved,
        solve_episodes=jnp.where(enough, 0.0, solve_episodes),
        solve_falls=jnp.where(enough, 0.0, solve_falls),
    )
    fresh = init_curriculum().replace(
        level=cur.level + rise.astype(jnp.int32), last_fall_rate=fall_rate, **solve
    )
    return jax.tree.map(lambda a, b: jnp.where(judged, a, b), fresh, cur.replace(**solve))


def solve_counts(fell, timeout, began_full) -> dict:
    """A step's `SOLVE_EPISODES` and `SOLVE_FALLS` figures (numpy or JAX arrays alike)."""
    return {SOLVE_EPISODES: (fell + timeout) * began_full, SOLVE_FALLS: fell * began_full}


def control_substeps(model: mujoco.MjModel, config: StanceConfig) -> int:
    """Physics steps per control step; an error when `control_dt_s` is not a multiple of the timestep."""
    substeps = int(round(config.control_dt_s / model.opt.timestep))
    if not math.isclose(substeps * model.opt.timestep, config.control_dt_s, rel_tol=1e-6):
        raise ValueError(
            f"control_dt_s {config.control_dt_s} is not a multiple of the physics timestep "
            f"{model.opt.timestep}"
        )
    return substeps


def rhythm_steps(config: StanceConfig) -> int:
    """Control steps per period of the reference bounce."""
    return max(2, int(round(config.rhythm_period_s / config.control_dt_s)))


def shove_steps(config: StanceConfig) -> tuple[int, int]:
    """Range [low, high) of control steps between shoves."""
    low, high = (int(round(s / config.control_dt_s)) for s in config.shove_interval_s)
    return low, high


class StanceEnv:
    """The stance task on one boxer body (see the module docstring)."""

    cpu_derived: tuple[str, ...] = ()
    """Derived physics fields `after_physics` reads besides the sensors (`boxjax.envs.cpu`): none."""

    def __init__(self, config: StanceConfig = StanceConfig(), backend: physics_backend.Backend | None = None):
        self.config = config
        self.mj_model, arena = mjcf.build(config.body)
        config.configure_model(self.mj_model)
        self.index = arena.red
        budget = config.contact_budget()
        self.backend = backend or physics_backend.make("jax", budget.ncon_per_world, budget.njmax)
        self.substeps = control_substeps(self.mj_model, config)
        self.rhythm_steps = rhythm_steps(config)
        self.shove_steps = shove_steps(config)
        self.layout = stance_math.Layout.build(self.mj_model, self.index, self.rhythm_steps)
        self.nu = self.layout.nu
        self.action_size = int(self.index.action_size)
        self.observation_size = 4 * self.nu + 15 + self.action_size

    # -- protocol -------------------------------------------------------------------------------------
    def describe(self) -> dict:
        """What a checkpoint records about this environment."""
        return {"env": "stance", "body": self.config.body, "config": self.config.to_dict()}

    def default_params(self) -> StanceParams:
        """Model, data template and reference tables on the device; amplitude 0."""
        return StanceParams(
            model=self.backend.put_model(self.mj_model),
            template=self.backend.make_data(self.mj_model),
            tables=jnp.asarray(reference_tables(self.index, self.config)),
            amplitude=jnp.zeros((), jnp.float32),
        )

    def reset(self, params: StanceParams, key: jax.Array) -> State:
        """The reference pose at the current amplitude with a little noise, at a random rhythm phase."""
        key, k_noise, k_phase, k_shove = jax.random.split(key, 4)
        amp, noise = params.amplitude, self.config.init_noise_rad
        noise = jax.random.uniform(k_noise, (self.nu,), jnp.float32, -noise, noise)
        root, joints = stance_math.initial_pose(self.index, amp, noise)
        root_q = self.layout.root_q
        qpos = params.template.qpos.at[root_q : root_q + 7].set(root)
        qpos = qpos.at[self.layout.act_qpos_adr].set(joints)
        data = params.template.replace(qpos=qpos, qvel=jnp.zeros_like(params.template.qvel), ctrl=joints)
        info = StanceInfo(
            step=jnp.zeros((), jnp.int32),
            phase=jax.random.randint(k_phase, (), 0, self.rhythm_steps),
            next_shove=jax.random.randint(k_shove, (), *self.shove_steps),
            prev_action=jnp.zeros((self.action_size,), jnp.float32),
            key=key,
            began_full=(amp >= 1.0).astype(jnp.float32),
        )
        ref_pose, ref_height = stance_math.reference(params.tables[info.phase], amp, self.nu)
        touch = jnp.zeros((2,), jnp.float32)
        obs = stance_math.observe(
            data.qpos,
            data.qvel,
            touch,
            ref_pose,
            ref_height,
            amp,
            info.phase,
            info.prev_action,
            self.layout,
        )
        zero = jnp.zeros((), jnp.float32)
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
        """One control step: `before_physics` (the action around the reference, maybe a shove), the
        physics, `after_physics` (score, observe)."""
        data, draws = self.before_physics(params, state, action)
        data = self.backend.step(params.model, data, self.substeps)
        return self.after_physics(params, state, data, action, draws)

    def before_physics(self, params: StanceParams, state: State, action: jax.Array):
        """The step up to the physics: PD targets around the next reference pose, a shove's kick when due.
        Pure and per world, like `step`.

        Returns:
          (physics state to step from, `StanceDraws` for `after_physics`).
        """
        info, cfg, lay = state.info, self.config, self.layout
        phase = (info.phase + 1) % self.rhythm_steps
        ref_pose, _ = stance_math.reference(params.tables[phase], params.amplitude, self.nu)
        ctrl = stance_math.joint_targets(ref_pose, action, lay, cfg.action_scale_rad)
        key, k_dir, k_speed, k_next = jax.random.split(info.key, 4)
        shove = info.step == info.next_shove
        angle = jax.random.uniform(k_dir, (), jnp.float32, 0.0, 2.0 * jnp.pi)
        speed = jax.random.uniform(k_speed, (), jnp.float32, *cfg.shove_speed_mps)
        kick = stance_math.shove_velocity(angle, speed) * shove
        qvel = state.data.qvel.at[lay.root_v : lay.root_v + 2].add(kick)
        draws = StanceDraws(phase=phase, shove=shove, key=key, next_key=k_next)
        return state.data.replace(ctrl=ctrl, qvel=qvel), draws

    def after_physics(
        self, params: StanceParams, state: State, data, action: jax.Array, draws: StanceDraws
    ) -> State:
        """The step after the physics: guard against NaN, score, observe.

        `data` is the physics state stepped from `before_physics`' output: an `mjx.Data`, or any object
        with the fields the task reads and a `replace` (`boxjax.physics.cpu.PhysicsView`); `state` and
        `action` are `before_physics`' arguments. Pure and per world, like `step`.
        """
        info, cfg, lay = state.info, self.config, self.layout
        phase, shove, amp = draws.phase, draws.shove, params.amplitude
        ref_pose, ref_height = stance_math.reference(params.tables[phase], amp, self.nu)
        data, finite = base.reset_nonfinite(self.backend, data, params.template.qpos)
        touch = data.sensordata[lay.touch_adr]
        terms, fell = stance_math.score(
            data.qpos, data.qvel, touch, ref_pose, ref_height, action, info.prev_action, lay, cfg
        )
        nonfinite = 1.0 - finite.astype(jnp.float32)  # reset and ended, but not a fall
        fell = fell * finite
        step = info.step + 1
        timeout = (step >= cfg.max_steps).astype(jnp.float32) * (1.0 - fell)
        reward = stance_math.total_reward(terms, fell, cfg.w_fall)
        next_shove = jnp.where(
            shove, step + jax.random.randint(draws.next_key, (), *self.shove_steps), info.next_shove
        )
        info = info.replace(step=step, phase=phase, next_shove=next_shove, prev_action=action, key=draws.key)
        obs = stance_math.observe(data.qpos, data.qvel, touch, ref_pose, ref_height, amp, phase, action, lay)
        metrics = {f"reward/{k}": v for k, v in terms.items()}
        metrics.update(self.backend.figures(data))
        metrics.update(fall=fell, shove=shove.astype(jnp.float32), nan=nonfinite)
        metrics.update(solve_counts(fell, timeout * finite, info.began_full))
        return base.guarded_state(data, obs, reward, fell, timeout, finite, metrics, info)

    # -- curriculum -----------------------------------------------------------------------------------
    def init_curriculum(self) -> StanceCurriculum:
        """Level 0 (the plain standing pose), nothing counted yet."""
        return init_curriculum()

    def apply_curriculum(self, params: StanceParams, curriculum: StanceCurriculum) -> StanceParams:
        """Write the amplitude of the current level into the params."""
        return params.replace(amplitude=curriculum_amplitude(self.config, curriculum))

    def update_curriculum(self, curriculum: StanceCurriculum, stats: EpisodeSummary) -> StanceCurriculum:
        """See the module-level `update_curriculum`."""
        return update_curriculum(self.config, curriculum, stats)

    def solved(self, curriculum: StanceCurriculum, stats: EpisodeSummary) -> jax.Array:
        """Whether the episodes begun at full amplitude, at least one per world, fell at most
        `solved_max_fall_rate` of the time and otherwise lasted the full episode (`update_curriculum`)."""
        return curriculum.solved

    def _zero_metrics(self) -> dict[str, jax.Array]:
        metrics = {f"reward/{k}": jnp.zeros((), jnp.float32) for k in stance_math.TERMS}
        metrics.update({k: jnp.zeros((), jnp.float32) for k in self.backend.figure_names})
        metrics.update(fall=jnp.zeros(()), shove=jnp.zeros(()), nan=jnp.zeros(()))
        metrics.update({SOLVE_EPISODES: jnp.zeros(()), SOLVE_FALLS: jnp.zeros(())})
        return {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}
