"""Block: mixed episodes around the guard; an opponent throws recorded punches, seen through delayed vision.

Every world draws one episode kind at reset (`KINDS`: face the opponent, block on command, walk to a spot,
punch the bag, recover from a shove). A step is two pure halves around the physics (`BlockEnv.before_physics`,
`BlockEnv.after_physics`), so the CPU path (`boxjax.envs.cpu`) runs this same task code around MuJoCo's C
engine. How each kind works, how a punch is judged, the observation layout and the metrics:
`docs/tasks/block.md`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from boxjax import mjcf
from boxjax.envs import base, frames, rewards
from boxjax.envs.base import State
from boxjax.envs.block import from_stance, ik, procedural, punches, stances, vision
from boxjax.envs.block import kinds as block_kinds
from boxjax.envs.block import opponent as block_opponent
from boxjax.envs.block import punch as block_punch
from boxjax.envs.block.config import (
    BAG,
    COMMAND,
    EVENTS,
    FACE,
    KINDS,
    NUM_POSES,
    REWARD_TERMS,
    SHOVE,
    SUCCESS,
    TASK_FIELDS,
    WALK,
    BlockConfig,
    BlockInfo,
    BlockParams,
    StepDraws,
    weighted_terms,
)
from boxjax.envs.walk import env as walk
from boxjax.envs.walk import teacher as teacher_lib
from boxjax.mjcf import puppet, sparring
from boxjax.physics import backend as physics_backend


def punch_terms(events: dict[str, jax.Array], score: jax.Array) -> dict[str, jax.Array]:
    """The unweighted reward terms of the step's punch judgement: `block` per blocked punch, `hit` minus the
    score of each arrival not parried, `parry` per parried punch."""
    return {
        "block": events["punch/blocked"],
        "hit": -(events["punch/arrived"] - events["punch/parried"]) * score,
        "parry": events["punch/parried"],
    }


class PunchJudgement(NamedTuple):
    """The current punch as `BlockEnv._judge_punch` judged it after a step."""

    events: dict
    """`block_punch.punch_events`' per-step figures (`punch/*`), zero outside face episodes."""
    gap: jax.Array
    """() metres of its closest approach so far."""
    score: jax.Array
    """() its score there, 0 unless it came within reach."""
    parried: jax.Array
    """() float32 1 once its glove touched our guard on the way."""
    glove: jax.Array
    """(3,) the punching glove now (the start of its next sweep)."""


class BlockEnv:
    """The block task (see the module docstring)."""

    cpu_derived: tuple[str, ...] = ("xpos", "xmat", "geom_xpos", "geom_xmat", "site_xpos", "site_xmat")
    """Derived physics fields `after_physics` reads (`boxjax.envs.cpu`): bodies, geoms and sites (vision,
    the punch score, the arm fit's chain)."""
    model_adapters = {"stance": from_stance.STANCE_ADAPTER}
    """How a run of this task starts from another task's model (`boxjax.rl.init_from`): a stance model's
    first layers mapped onto the block observation."""

    def __init__(self, config: BlockConfig | None = None, backend: physics_backend.Backend | None = None):
        config = config or BlockConfig()
        self.config = config
        lib = punches.load(config.punch_library or None, body=config.body)
        self.simulated = config.opponent == "simulated"
        """Whether the opponent is a simulated fighter (else the puppet)."""
        frozen = self.simulated and config.opponent_freeze_idle
        self.opponent_frozen = punches.idle_hinges(lib, config.opponent_body) if frozen else {}
        """The simulated opponent's hinges fixed in his body, with their angles (rad)."""
        if self.simulated:
            punches.require_body(lib, config.opponent_body, config.punch_library or None)
            self.arena = sparring.build(
                config.body,
                config.opponent_body,
                lib.distance_m,
                config.opponent_weld_timeconst_s,
                self.opponent_frozen,
            )
            self.opponent = self.arena.index.blue
            self.guard_qpos = self.arena.guard_qpos.astype(np.float32)
        else:
            self.arena = puppet.build(config.body, lib.distance_m, config.opponent_contact_timeconst_s)
            self.opponent = self.arena.puppet
        self.mj_model, arena = self.arena.model, self.arena.index
        config.configure_model(self.mj_model)
        self.me = arena.red
        if not self.simulated:
            self.guard_qpos = self.mj_model.key_qpos[arena.keyframes["stance"]].astype(np.float32)
        """(nq,) both fighters in the guard (the puppet: ours only), the bag at rest."""
        slots = config.contact_budget()
        self.backend = backend or physics_backend.make("jax", slots.ncon_per_world, slots.njmax)
        self.substeps = int(round(config.control_dt_s / self.mj_model.opt.timestep))
        if not math.isclose(self.substeps * self.mj_model.opt.timestep, config.control_dt_s, rel_tol=1e-6):
            raise ValueError(
                f"control_dt_s {config.control_dt_s} is not a multiple of the physics timestep "
                f"{self.mj_model.opt.timestep}"
            )
        self.library = punches.resample(lib, 1.0 / config.control_dt_s)
        self.guard_mocap_pos = self.mj_model.key_mpos[arena.keyframes["stance"]].reshape(-1, 3)
        self.guard_mocap_quat = self.mj_model.key_mquat[arena.keyframes["stance"]].reshape(-1, 4)
        self._resolve(arena)
        self.obs_slices = self._layout()
        self.observation_size = self.obs_slices["task"].stop
        self._resolve_procedural(lib)
        self._resolve_agents()
        self.teacher = teacher_lib.teacher_for(config.teacher, config.body)
        if self.teacher is not None:
            self.distill_target = self._distill_target

    def _resolve(self, arena: mjcf.ArenaIndex) -> None:
        """Ids, sizes and constants the step reads (numpy, resolved once)."""
        model, cfg, me, opp = self.mj_model, self.config, self.me, self.opponent
        self.vision_index = vision.vision_index(model, me, opp)
        self.delay_steps = vision.delay_steps(cfg.vision_delay_s, cfg.control_dt_s)
        self.lag_steps = cfg.steps(cfg.arrival_lag_s)
        self.gap_steps = tuple(cfg.steps(s) for s in cfg.punch_gap_s)
        self.shove_steps = tuple(cfg.steps(s) for s in cfg.shove_at_s)
        self.blockers = vision.capsule_index(model, np.concatenate([me.glove_geom_ids, me.forearm_geom_ids]))
        self.targets = vision.capsule_index(model, [me.head_geom_id, model.geom(me.prefix + "chest").id])
        self.opponent_gloves = vision.capsule_index(model, opp.glove_geom_ids)
        self.gloves = vision.capsule_index(model, me.glove_geom_ids)
        self.bag = vision.capsule_index(model, [arena.bag_geom])
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)
        self.bag_rest = data.geom_xpos[arena.bag_geom].astype(np.float32)
        """(3,) the bag's centre hanging at rest."""
        self.arm_ik = ik.make_arm_ik(model, me)
        where = [np.flatnonzero(me.act_qpos_adr == q) for q in self.arm_ik.qpos_adr]
        if any(w.size != 1 for w in where):
            raise ValueError("every IK arm joint must be actuated")
        self.arm_act = np.array([w[0] for w in where], np.int32)
        """(8,) actuator positions of the IK's arm joints."""
        self.arm_chain = ik.make_arm_chain(model, self.arm_ik)
        self.press_steps = tuple(max(cfg.steps(s), 1) for s in cfg.press_interval_s)
        """(fewest, most) control steps from one block press to the next."""
        root = self.guard_qpos[me.qpos_adr : me.qpos_adr + 7]
        with jax.ensure_compile_time_eval():  # a host constant, even for an env built inside a trace
            yaw = float(frames.yaw(jnp.asarray(root[3:7])))
        self.scene_ref = np.array([root[0], root[1], yaw], np.float32)
        """(3,) our pelvis (x, y, heading) at the guard keyframe: where the punch recordings put us."""
        guard = mujoco.MjData(model)
        guard.qpos[:] = self.guard_qpos
        mujoco.mj_kinematics(model, guard)
        self.scene_head = (guard.geom_xpos[me.head_geom_id, :2] - root[:2]).astype(np.float32)
        """(2,) our head's floor position from the pelvis at the guard keyframe (the opponent follows it)."""
        root_xy = self.guard_qpos[opp.qpos_adr : opp.qpos_adr + 2] if self.simulated else opp.root_xy
        self.park_offset = np.zeros(3, np.float32)
        self.park_offset[:2] = np.asarray(cfg.opponent_park_m) - root_xy
        """(3,) the opponent's move from the face position to his parking spot."""
        self.nu = int(me.act_qpos_adr.shape[0])
        self.action_size = int(me.action_size)
        self.body_weight_n = float(model.body_subtreemass[me.pelvis_body] * -model.opt.gravity[2])
        self.guard_height = float(me.stance_qpos[2])
        with jax.ensure_compile_time_eval():  # a host constant, even for an env built inside a trace
            self.guard_yaw = float(frames.yaw(jnp.asarray(me.stance_qpos[3:7])))
        """The pelvis yaw of the guard: the hips turn this far from the facing direction."""

    def _resolve_procedural(self, lib: punches.PunchLibrary) -> None:
        """The bank, clock and joint map of procedural and held-out punches (`BlockConfig.punch_source`);
        a clear error where the opponent cannot throw them."""
        cfg = self.config
        self.procedural = cfg.punch_source != "library"
        """Whether punches come from the keyframe bank (procedural or held-out) instead of the table."""
        if not self.procedural:
            return
        if not self.simulated or cfg.opponent_freeze_idle:
            raise ValueError(
                f"punch_source={cfg.punch_source!r} needs the simulated opponent with every hinge "
                "(opponent='simulated', opponent_freeze_idle=false)"
            )
        self.bank = procedural.load_bank()
        if cfg.opponent_body not in self.bank.bodies or abs(self.bank.distance_m - lib.distance_m) > 1e-4:
            raise ValueError(
                f"{procedural.BANK_PATH}: punch bank made for bodies {list(self.bank.bodies)} at "
                f"{self.bank.distance_m:g} m, not {cfg.opponent_body!r} at {lib.distance_m:g} m"
            )
        names = [
            self.mj_model.actuator(a).name.removeprefix(self.opponent.prefix)
            for a in self.opponent.actuator_ids
        ]
        missing = [n for n in self.bank.joint_names if n not in names]
        if missing:
            raise ValueError(f"punch bank joints {missing} are not actuated joints of the opponent's body")
        self.bank_cols = np.array([names.index(n) for n in self.bank.joint_names], np.int32)
        """(J,) the opponent's actuator of each bank joint."""
        self.stances = stances.stances(
            cfg.opponent_body, names, self.opponent.stance_ctrl, self.arena.anchor_pos, self.arena.anchor_quat
        )
        """His guard and root in both stances, picked by a punch's `southpaw` flag."""
        distribution = procedural.Distribution(heldout=cfg.punch_source in procedural.HELDOUT_SETS)
        self.clock = procedural.Clock(distribution, self.gap_steps, cfg.control_dt_s)
        anchor = np.asarray(self.arena.anchor_pos, np.float32)[:2] - self.scene_ref[:2]
        self.scene_dir = (anchor / np.linalg.norm(anchor)).astype(np.float32)
        """(2,) the recorded scene's direction from our pelvis to the opponent (his distance offsets)."""

    def _resolve_agents(self) -> None:
        """The learners of a world (`agents`, `boxjax.envs.base`): none named with the scripted opponent (the
        one-agent protocol); our fighter ("blocker") then the opponent with the learned one."""
        self.learned = self.config.opponent_policy == "learned"
        """Whether the opponent is a learner (`BlockConfig.opponent_policy`)."""
        self.agents: tuple[base.Agent, ...] = ()
        if not self.learned:
            return
        index = block_opponent.opponent_index(self.me, self.opponent)
        self.opponent_index = index
        guard = mujoco.MjData(self.mj_model)
        guard.qpos[:] = self.guard_qpos
        mujoco.mj_kinematics(self.mj_model, guard)
        with jax.ensure_compile_time_eval():  # a host constant, even for an env built inside a trace
            seen = block_opponent.view(guard.site_xpos, guard.xpos, guard.xmat, index)
            self.opponent_guard_view = np.asarray(seen, np.float32)
        """(VIEW_SIZE,) what the opponent sees of our fighter in the guard: his view before the first step."""
        self.agents = (
            base.Agent("blocker", self.observation_size, self.action_size),
            base.Agent("opponent", block_opponent.observation_size(index), int(index.qpos_adr.shape[0])),
        )

    def _split_action(self, action) -> tuple[jax.Array, jax.Array | None]:
        """(our fighter's action, the learned opponent's or None) from the action `step` was given: our
        (action_size,) array (he then at zero offsets) or, with the learned opponent, a dict by agent name."""
        if not self.learned:
            return action, None
        actions = base.split_action(self.agents, action)
        return actions["blocker"], actions["opponent"]

    def _layout(self) -> dict[str, slice]:
        """Where each field sits in the observation (`obs_slices`)."""
        sizes = [
            ("joints", self.nu), ("joint_vel", self.nu), ("height", 1), ("gravity", 3), ("lin_vel", 3),
            ("ang_vel", 3), ("touch", 2), ("prev_action", self.action_size), ("vision", vision.FRAME_SIZE),
            *TASK_FIELDS,
        ]  # fmt: skip
        out, start = {}, 0
        for name, size in sizes:
            out[name] = slice(start, start + size)
            start += size
        out["proprio"] = slice(0, out["prev_action"].stop)
        out["task"] = slice(out["kind"].start, start)
        return out

    # -- protocol -------------------------------------------------------------------------------------
    def describe(self) -> dict:
        """What a checkpoint records about this environment."""
        return {"env": "block", "body": self.config.body, "config": self.config.to_dict()}

    def default_params(self) -> BlockParams:
        """Model, guard template, punch table and IK model on the device; the config's kind weights."""
        template = self.backend.make_data(self.mj_model)
        ctrl = np.zeros(self.mj_model.nu, np.float32)
        ctrl[self.me.actuator_ids] = self.me.stance_ctrl
        if self.simulated:
            ctrl[self.opponent.actuator_ids] = self.opponent.stance_ctrl
        guard = mujoco.MjData(self.mj_model)
        guard.qpos[:] = self.guard_qpos
        mujoco.mj_kinematics(self.mj_model, guard)
        template = template.replace(
            qpos=jnp.asarray(self.guard_qpos),
            ctrl=jnp.asarray(ctrl),
            mocap_pos=jnp.asarray(self.guard_mocap_pos, jnp.float32),
            mocap_quat=jnp.asarray(self.guard_mocap_quat, jnp.float32),
        )
        return BlockParams(
            model=self.backend.put_model(self.mj_model),
            template=template,
            punches=(
                punches.ctrl_table(self.library, self.mj_model, self.opponent, self.opponent_frozen)
                if self.simulated
                else punches.device_table(self.library, self.arena)
            ),
            guard_vision=jnp.asarray(vision.see(guard, self.vision_index), jnp.float32),
            ik_model=self.arm_ik.model,
            kind_weights=jnp.asarray(self.config.kind_weights, jnp.float32),
            teacher=self.teacher,
            bank=procedural.device_bank(self.bank) if self.procedural else None,
            draws=(
                procedural.load_table(procedural.HELDOUT_SETS[self.config.punch_source])
                if self.config.punch_source in procedural.HELDOUT_SETS
                else None
            ),
        )

    def reset(self, params: BlockParams, key: jax.Array) -> State:
        """Draw the episode kind, place the fighters for it, fit the command's arms, draw the task.

        The vision buffer starts full of the guard's frame (seen without the noise, which moves our
        gloves by millimetres), so a reset needs no physics pass; the IK runs its own kinematics.
        """
        me = self.me
        key, k_kind, k_noise, k_place, k_punch, k_command, k_walk, k_shove, k_press = jax.random.split(key, 9)
        kind = block_kinds.sample_kind(k_kind, params.kind_weights)
        qpos = self._initial_qpos(params, kind, k_noise, k_place)
        pose_ref, command, offset, residual = self._fit_command(params, qpos, k_command)
        pose_ref = jnp.where(kind == COMMAND, pose_ref, jnp.asarray(me.stance_ctrl))
        spot = self._draw_spot(qpos, k_walk)
        t = params.template
        anchor = jnp.asarray(self.scene_ref).at[2].set(0.0)
        data = self._pose_opponent(
            t.replace(qpos=qpos, qvel=jnp.zeros_like(t.qvel)), params.punches, 0, 0, kind, anchor
        )
        k_first, k_gap = jax.random.split(k_punch)
        punch = jax.random.randint(k_first, (), 0, params.punches.length.shape[0])
        frame = -jax.random.randint(k_gap, (), self.gap_steps[0], self.gap_steps[1] + 1)
        spec = draw = None
        if self.procedural:
            spec, draw, punch, frame = self.clock.start(params.bank, params.draws, k_punch)
        zero = jnp.zeros((), jnp.float32)
        seen = params.guard_vision * (kind == FACE)
        info = BlockInfo(
            step=jnp.zeros((), jnp.int32),
            kind=kind,
            pose_ref=pose_ref,
            punch=punch,
            frame=frame,
            prev_action=jnp.zeros((self.action_size,), jnp.float32),
            vision=vision.delay_init(seen, self.delay_steps),
            slot=jnp.zeros((), jnp.int32),
            command=command,
            command_offset=offset,
            ik_residual=residual,
            next_press=self._press_gap(k_press),
            hold=jnp.zeros((), jnp.int32),
            held=zero,
            spot=spot,
            spot_distance=jnp.linalg.norm(spot - qpos[me.qpos_adr : me.qpos_adr + 2]),
            reached=zero,
            glove_pos=jnp.zeros((2, 3), jnp.float32),
            glove_vel=jnp.zeros((2, 3), jnp.float32),
            touching=jnp.zeros((2,), jnp.float32),
            punch_glove=jnp.zeros((3,), jnp.float32),
            parried=zero,
            punch_gap=jnp.float32(block_punch.NO_GAP_M),
            punch_score=zero,
            opponent_anchor=anchor,
            shove_step=jax.random.randint(k_shove, (), self.shove_steps[0], self.shove_steps[1] + 1),
            key=key,
            spec=spec,
            draw=draw,
            opponent_view=self._opponent_view_init(kind),
        )
        obs = self._observe(
            qpos, data.qvel, jnp.zeros((2,), jnp.float32), info, seen, jnp.asarray(self.bag_rest)
        )
        return State(
            data=data,
            obs=obs,
            reward=zero,
            done=zero,
            truncation=zero,
            metrics=self._zero_metrics(),
            info=info,
            others=self._opponent_reset(params, qpos, data.qvel, info),
        )

    def step(self, params: BlockParams, state: State, action) -> State:
        """One control step: `before_physics` (the opponent's punch, our action, a shove), the physics,
        `after_physics` (see, score, reward, observe). `action`: our fighter's (action_size,) or, with the
        learned opponent, a dict of every agent's by name (`base.split_action`)."""
        if self.learned:  # split once: both halves read the same actions
            action = base.split_action(self.agents, action)
        data, draws = self.before_physics(params, state, action)
        data = self.backend.step(params.model, data, self.substeps)
        return self.after_physics(params, state, data, action, draws)

    def before_physics(self, params: BlockParams, state: State, action: jax.Array):
        """The step up to the physics: the opponent's punch clock advanced and his puppet posed, our PD
        targets driven by `action` (as `step`'s; the learned opponent's offsets his), the shove's kick. Pure
        and per world, like `step`.

        Returns:
          (physics state to step from, `StepDraws` for `after_physics`).
        """
        info, table = state.info, params.punches
        mine, his = self._split_action(action)
        key, k_punch, k_shove = jax.random.split(info.key, 3)
        spec = draw = None
        if self.procedural:
            spec, draw, punch, frame = self.clock.advance(
                params.bank, params.draws, info.spec, info.draw, info.punch, info.frame, k_punch
            )
        else:
            punch, frame = block_punch.advance_punch(table, info.punch, info.frame, k_punch, self.gap_steps)
        data = self._pose_opponent(
            state.data, table, punch, frame, info.kind, info.opponent_anchor, spec, his
        )
        data = self._drive(data, mine, info)
        data, shoved = self._shove(data, info, k_shove)
        return data, StepDraws(punch=punch, frame=frame, shoved=shoved, key=key, spec=spec, draw=draw)

    def after_physics(
        self, params: BlockParams, state: State, data, action: jax.Array, draws: StepDraws
    ) -> State:
        """The step after the physics, in stages: guard against NaN, see, judge the punch, reward, the task's
        own progress, metrics, observe.

        `data` is the physics state stepped from `before_physics`' output: an `mjx.Data`, or any object
        with the fields the task reads and a `replace` (`boxjax.physics.cpu.PhysicsView`); `state`
        and `action` are `before_physics`' arguments. Pure and per world, like `step`.

        Returns:
          the world's next `State` (its `data` is `data`, with qpos/qvel reset where not finite).
        """
        info, cfg = state.info, self.config
        action, his = self._split_action(action)
        face = (info.kind == FACE).astype(jnp.float32)
        data, finite = base.reset_nonfinite(self.backend, data, params.template.qpos)
        seen = self._see(data) * face
        buffer, slot, delayed = vision.delay_push(info.vision, info.slot, seen, self.delay_steps)
        judged = self._judge_punch(params.punches, data, info, draws, face)
        his_view, others, his_metrics = self._opponent_step(params, data, info, draws, judged.events, his)
        touch = data.sensordata[jnp.asarray(self.me.touch_sensor_adr)]
        terms, fell = self._rewards(data, touch, action, info)
        terms.update(punch_terms(judged.events, judged.score))
        fell = fell * finite
        step = info.step + 1
        task_terms, task_events, info = self._task(data, info.replace(step=step), fell)
        key, k_press = jax.random.split(draws.key)
        info, task_events["command/presses"] = self._press(data, info, k_press)
        terms = weighted_terms(cfg, {**terms, **task_terms})
        # he re-aims while he waits in the guard; a punch keeps its aim (no homing glove)
        waiting = finite & (draws.frame < 0)
        offset = draws.spec.distance_offset_m if self.procedural else 0.0
        anchor = jnp.where(waiting, self._follow(data, info.opponent_anchor, offset), info.opponent_anchor)
        info = info.replace(
            punch=draws.punch, frame=draws.frame, prev_action=action, vision=buffer, slot=slot, key=key,
            punch_glove=judged.glove, parried=judged.parried, punch_gap=judged.gap, punch_score=judged.score,
            opponent_anchor=anchor, spec=draws.spec, draw=draws.draw, opponent_view=his_view,
        )  # fmt: skip
        events = {**judged.events, **task_events}
        metrics = {
            **self._metrics(data, info, terms, events, seen, draws.shoved, fell, finite),
            **his_metrics,
        }
        timeout = (step >= cfg.max_steps).astype(jnp.float32) * (1.0 - fell)
        reward = sum(terms[k] for k in REWARD_TERMS) - cfg.w_fall * fell
        bag = data.geom_xpos[self.bag.geom_ids[0]]
        obs = self._observe(data.qpos, data.qvel, touch, info, delayed, bag)
        return base.guarded_state(data, obs, reward, fell, timeout, finite, metrics, info, others)

    def _judge_punch(self, table, data, info: BlockInfo, draws: StepDraws, face) -> PunchJudgement:
        """The opponent's current punch judged after this step: its closest approach so far and its score
        there (`block_punch.closest_approach`), a touch of our guard on the way, and the step's events
        (`block_punch.punch_events`; face episodes only)."""
        cfg, frame = self.config, draws.frame
        current = self._current_punch(table, draws.punch, draws.spec)
        gloves, blockers = self._punch_capsules(data)
        hand = current.hand
        score, gap = self._score(data, gloves, blockers, hand, current.target)
        best_gap, best_score = block_punch.closest_approach(
            frame, gap, score, info.punch_gap, info.punch_score
        )
        reached = (best_gap <= cfg.reach_m).astype(jnp.float32)
        best_score = best_score * reached
        contact, glove = block_punch.guard_contact(
            gloves, blockers, hand, info.punch_glove, cfg.touch_margin_m
        )
        parried = jnp.where(frame > 0, jnp.maximum(info.parried, contact), 0.0)  # a sweep from frame 1 on
        events = block_punch.punch_events(
            current, frame, best_score, reached, parried, self.lag_steps, cfg.block_max_score,
            cfg.clean_hit_score, touch_blocks=not self.simulated,
        )  # fmt: skip
        events = {k: v * face for k, v in events.items()}
        return PunchJudgement(events=events, gap=best_gap, score=best_score, parried=parried, glove=glove)

    def _current_punch(self, table: punches.PunchTable, punch, spec) -> block_punch.CurrentPunch:
        """The punch being thrown (after the clock advanced): row `punch` of the table, or the procedural
        `spec`."""
        if not self.procedural:
            return block_punch.table_punch(table, punch)
        return block_punch.CurrentPunch(spec.length, spec.impact, spec.hand, spec.target, spec.feint)

    def punch_tags(self, params: BlockParams, state: State) -> dict[str, jax.Array]:
        """() int32 tags of the world's current punch (after a step: the one whose events that step
        reported), each an index into `punches.TAGS[name]`: kind, target, speed. Pure and per world."""
        del params
        if self.procedural:
            spec = state.info.spec
            return {"kind": spec.kind, "target": spec.target, "speed": spec.speed}
        tags = {k: jnp.asarray(v) for k, v in punches.tag_indices(self.library).items()}
        return {name: table[state.info.punch] for name, table in tags.items()}

    def _metrics(self, data, info: BlockInfo, terms: dict, events: dict, seen, shoved, fell, finite) -> dict:
        """The step's metrics: every reward term (`reward/<term>`), the physics backend's figures, the
        punch and task events, the episode kind, and the block, vision, shove, fall and NaN figures."""
        metrics = {f"reward/{k}": jnp.asarray(v, jnp.float32) for k, v in terms.items()}
        metrics.update(self.backend.figures(data))
        metrics.update(events)
        metrics.update({f"kind/{k}": (info.kind == i).astype(jnp.float32) for i, k in enumerate(KINDS)})
        face = (info.kind == FACE).astype(jnp.float32)
        metrics.update(
            {
                "success/blocks": events["punch/blocked"],
                "vision/hidden": face * (1.0 - jnp.mean(seen[3::4])),
                "shove/shoved": shoved,
                "fall": fell,
                "nan": 1.0 - finite.astype(jnp.float32),
            }
        )
        return metrics

    # -- learned opponent ----------------------------------------------------------------------------
    def _opponent_view_init(self, kind) -> jax.Array | None:
        """The learned opponent's view buffer at reset, full of his view of our guard in face episodes
        (zeros otherwise, as our vision); None with the scripted opponent."""
        if not self.learned:
            return None
        return vision.delay_init(jnp.asarray(self.opponent_guard_view) * (kind == FACE), self.delay_steps)

    def _opponent_reset(self, params: BlockParams, qpos, qvel, info: BlockInfo) -> dict | None:
        """The learned opponent's `State.others` at reset (his first observation, reward 0); None with the
        scripted opponent."""
        if not self.learned:
            return None
        punch = (info.kind, info.punch, info.frame, info.spec)
        obs = self._opponent_observe(params.punches, qpos, qvel, punch, info.opponent_view[0])
        return {"opponent": base.AgentStep(obs=obs, reward=jnp.zeros((), jnp.float32))}

    def _opponent_step(self, params: BlockParams, data, info: BlockInfo, draws: StepDraws, events: dict, his):
        """The learned opponent after the physics: (his view buffer with this step's frame pushed, his
        `State.others`, his metrics `block_opponent.METRICS`); (None, None, {}) with the scripted one.
        `info` is the state's before the step, `events` the step's `punch/*` figures."""
        if not self.learned:
            return None, None, {}
        cfg = self.config
        face = info.kind == FACE
        seen = block_opponent.view(data.site_xpos, data.xpos, data.xmat, self.opponent_index) * face
        buffer, _, delayed = vision.delay_push(info.opponent_view, info.slot, seen, self.delay_steps)
        punch = (info.kind, draws.punch, draws.frame, draws.spec)
        obs = self._opponent_observe(params.punches, data.qpos, data.qvel, punch, delayed)
        reward = block_opponent.reward(events, his, cfg.opponent_clean_bonus, cfg.w_opponent_effort)
        metrics = dict(zip(block_opponent.METRICS, (reward, block_opponent.effort(his)), strict=True))
        return buffer, {"opponent": base.AgentStep(obs=obs, reward=reward)}, metrics

    def _opponent_observe(self, table, qpos, qvel, punch: tuple, seen) -> jax.Array:
        """The learned opponent's observation (`block_opponent.observe`) in `qpos`, `qvel`, with his delayed
        view `seen`; `punch` is (episode kind, punch, frame, procedural spec or None) after the clock."""
        kind, row, frame, spec = punch
        face = kind == FACE
        at = jnp.where(face, jnp.maximum(frame, 0), 0)
        scripted = self._scripted_ctrl(table, row, at, spec)
        current = self._current_punch(table, row, spec)
        phase = block_opponent.punch_phase(current, frame, face, self.config.control_dt_s)
        return block_opponent.observe(qpos, qvel, scripted, seen, phase, self.opponent_index)

    # -- teacher hook ---------------------------------------------------------------------------------
    def teacher_command(self, state: State) -> jax.Array:
        """(3,) float32 velocity command for the walking teacher in this world: (forward m/s, left m/s,
        yaw rate rad/s) in our facing frame (`_facing`, the frame of `boxjax.envs.walk.env`'s commands).

        Walk episodes: toward the spot at `walk_speed_mps`, slowing linearly inside the last 0.5 m,
        zero once reached; the yaw rate is 0 (footwork keeps the guard's facing). Every other kind: zero.
        Pure and per world, like `step`: vmap it over the batch. With a teacher (`BlockConfig.teacher`)
        it drives the distillation target (`_distill_target`). Every kind gets a command (zero: stand in
        the guard), so the teacher pulls the legs in every episode.
        """
        me, info = self.me, state.info
        root = state.data.qpos[me.qpos_adr : me.qpos_adr + 7]
        rel = jnp.concatenate([info.spot - root[:2], jnp.zeros((1,), jnp.float32)])
        local = frames.to_heading_frame(self._facing(root[3:7]), rel)[:2]
        dist = jnp.linalg.norm(local)
        speed = self.config.walk_speed_mps * jnp.clip(dist / 0.5, 0.0, 1.0)
        active = (info.kind == WALK) & (info.reached < 0.5)
        velocity = jnp.where(active, speed * local / jnp.maximum(dist, 1e-6), 0.0)
        return jnp.concatenate([velocity, jnp.zeros((1,), jnp.float32)]).astype(jnp.float32)

    def _distill_target(self, params: BlockParams, state: State) -> tuple[jax.Array, jax.Array]:
        """The distillation hook (`boxjax.rl.rollout.has_distill_target`), present with a teacher: the
        walking teacher's leg actions for this world, in this task's action units, and the leg mask.

        The teacher sees `walk.walk_observation` of our fighter under `teacher_command`. Both tasks set
        the legs' PD targets to the guard plus a scaled action (block episodes refit only the arms), so
        its actions carry over, rescaled by the ratio of the two action scales."""
        t = params.teacher
        obs = walk.walk_observation(self.me, state.data, self.teacher_command(state))
        scale = t.action_scale_rad / self.config.action_scale_rad
        return jnp.clip(scale * teacher_lib.teacher_action(t, obs), -1.0, 1.0), t.leg_mask

    # -- reset pieces ---------------------------------------------------------------------------------
    def _initial_qpos(self, params: BlockParams, kind, k_noise, k_place) -> jax.Array:
        """(nq,) the guard with joint noise, our fighter placed for `kind` (the simulated opponent facing
        him in face episodes, else parked)."""
        me, cfg = self.me, self.config
        k_yaw, k_dist = jax.random.split(k_place)
        noise = jax.random.uniform(k_noise, (self.nu,), jnp.float32, -cfg.init_noise_rad, cfg.init_noise_rad)
        qpos = params.template.qpos.at[jnp.asarray(me.act_qpos_adr)].add(noise)
        root = qpos[me.qpos_adr : me.qpos_adr + 7]
        yaw = jax.random.uniform(k_yaw, (), jnp.float32, -jnp.pi, jnp.pi)
        dist = jax.random.uniform(k_dist, (), jnp.float32, *cfg.bag_distance_m)
        bag_xy = jnp.asarray(self.bag_rest[:2])
        facing_bag = bag_xy - dist * jnp.stack([jnp.cos(yaw), jnp.sin(yaw)])
        walk = frames.turn_root(root, yaw, jnp.asarray(cfg.walk_origin_m, jnp.float32))
        bag = frames.turn_root(root, yaw, facing_bag)
        root = jnp.where(kind == WALK, walk, jnp.where(kind == BAG, bag, root))
        qpos = qpos.at[me.qpos_adr : me.qpos_adr + 7].set(root)
        if self.simulated:  # the opponent parked outside face episodes
            adr = self.opponent.qpos_adr
            park = jnp.where(kind == FACE, 0.0, jnp.asarray(self.park_offset[:2]))
            qpos = qpos.at[adr : adr + 2].add(park)
        return qpos

    def _fit_command(self, params: BlockParams, qpos: jax.Array, key: jax.Array):
        """The first press drawn and fitted: (guard pose with the fitted arms (nu,), nearest named pose,
        glove offsets (2, 3), IK residual); with "ik" ablated, the guard pose, pose 0 and no offsets."""
        if "ik" in self.config.ablate:
            zeros = jnp.zeros((2, 3), jnp.float32)
            return jnp.asarray(self.me.stance_ctrl), jnp.zeros((), jnp.int32), zeros, jnp.zeros(())
        offset = ik.draw_offsets(key, self.arm_ik.targets_m, self.config.command_jitter_m)
        angles, residual = self._fit_arms(params, qpos, offset)
        pose_ref = jnp.asarray(self.me.stance_ctrl).at[jnp.asarray(self.arm_act)].set(angles)
        return pose_ref, ik.nearest_pose(self.arm_ik, offset), offset, residual

    def _fit_arms(self, params: BlockParams, qpos: jax.Array, offset: jax.Array):
        """(arm angles (J,), IK residual ()) of the guard offsets `offset` (2, 3) for our fighter in `qpos`,
        by `ik.solve_arms` on MJX's kinematics (the CPU path puts MuJoCo C's in its place)."""
        cfg = self.config
        arm_ik = dataclasses.replace(self.arm_ik, model=params.ik_model)
        targets = ik.guard_targets(arm_ik, qpos, offset)
        return ik.solve_arms(arm_ik, qpos, targets, cfg.ik_iterations, cfg.ik_damping)

    def _press_gap(self, key: jax.Array) -> jax.Array:
        """() int32 control steps to the next block press, drawn from `press_interval_s`."""
        return jax.random.randint(key, (), self.press_steps[0], self.press_steps[1] + 1)

    def _press(self, data, info: BlockInfo, key: jax.Array) -> tuple[BlockInfo, jax.Array]:
        """After the physics, in command episodes: a new press when its step has come (targets drawn from the
        guard region, the hold restarted), then `ik_iterations_per_step` steps of the arm fit toward the
        current targets from the stepped torso (`ik.track_arms`). Returns (info, 1.0 where a press came);
        other kinds, and an ablated "ik", keep their reference pose."""
        cfg = self.config
        command = info.kind == COMMAND
        if "ik" in cfg.ablate:
            return info, jnp.zeros((), jnp.float32)
        arm_ik, chain, act = self.arm_ik, self.arm_chain, jnp.asarray(self.arm_act)
        k_offset, k_gap = jax.random.split(key)
        due = command & (info.step >= info.next_press)
        drawn = ik.draw_offsets(k_offset, arm_ik.targets_m, cfg.command_jitter_m)
        offset = jnp.where(due, drawn, info.command_offset)
        targets = ik.targets_from_head(data.xpos[arm_ik.head_body], data.xmat[arm_ik.pelvis_body], offset)
        parents = jnp.asarray(chain.parent_body)
        angles, residual = ik.track_arms(
            arm_ik, chain, (data.xpos[parents], data.xmat[parents]), data.qpos, info.pose_ref[act],
            targets, cfg.ik_iterations_per_step, cfg.ik_damping,
        )  # fmt: skip
        info = info.replace(
            command=jnp.where(due, ik.nearest_pose(arm_ik, offset), info.command),
            command_offset=offset,
            pose_ref=jnp.where(command, info.pose_ref.at[act].set(angles), info.pose_ref),
            ik_residual=jnp.where(command, residual, info.ik_residual),
            next_press=jnp.where(due, info.step + self._press_gap(k_gap), info.next_press),
            hold=jnp.where(due, 0, info.hold),
            held=jnp.where(due, 0.0, info.held),
        )
        return info, due.astype(jnp.float32)

    def _draw_spot(self, qpos: jax.Array, key: jax.Array) -> jax.Array:
        """(2,) a walk spot `walk_distance_m` from our pelvis in any direction."""
        k_angle, k_dist = jax.random.split(key)
        angle = jax.random.uniform(k_angle, (), jnp.float32, -jnp.pi, jnp.pi)
        dist = jax.random.uniform(k_dist, (), jnp.float32, *self.config.walk_distance_m)
        return qpos[self.me.qpos_adr : self.me.qpos_adr + 2] + dist * jnp.stack(
            [jnp.cos(angle), jnp.sin(angle)]
        )

    # -- step pieces ----------------------------------------------------------------------------------
    def _follow(self, data, anchor: jax.Array, offset_m=0.0) -> jax.Array:
        """The opponent's anchor (3,) one control step closer to the one that puts the recording's head
        on ours (floor position) turned with our pelvis' heading (`follow_anchor`), from stepped `data`;
        `offset_m` farther from us (a procedural punch's distance)."""
        cfg, adr = self.config, self.me.qpos_adr
        turn = frames.yaw(data.qpos[adr + 3 : adr + 7]) - self.scene_ref[2]
        head = data.geom_xpos[self.me.head_geom_id, :2]
        xy = head - frames.turn_xy(jnp.asarray(self.scene_head), turn)
        if self.procedural:
            xy = xy + offset_m * frames.turn_xy(jnp.asarray(self.scene_dir), turn)
        target = jnp.concatenate([xy, turn[None]])
        return block_punch.follow_anchor(
            anchor,
            target,
            cfg.opponent_follow_mps * cfg.control_dt_s,
            cfg.opponent_turn_radps * cfg.control_dt_s,
        )

    def _pose_opponent(
        self,
        data: mjx.Data,
        table: punches.PunchTable,
        punch,
        frame,
        kind,
        anchor: jax.Array,
        spec=None,
        his=None,
    ) -> mjx.Data:
        """The opponent at `frame` of `punch` (the guard while he waits, frame < 0): in face episodes the
        recording moved with the scene to `anchor` (`place_scene`), otherwise parked in the guard. The
        simulated opponent gets the frame's PD targets (`_scripted_ctrl`; in face episodes offset by the
        learned opponent's action `his` when given) and his root anchor; the puppet, its body poses."""
        face = kind == FACE
        at = jnp.where(face, jnp.maximum(frame, 0), 0)
        if self.simulated:
            ctrl = self._scripted_ctrl(table, punch, at, spec)
            if his is not None:
                steered = block_opponent.steered_targets(
                    ctrl, his, self.config.opponent_offset_rad, self.opponent_index
                )
                ctrl = jnp.where(face, steered, ctrl)
            return self._drive_opponent(data, ctrl, face, anchor, None if spec is None else spec.southpaw)
        pos, quat = table.body_pos[punch, at], table.body_quat[punch, at]
        placed_pos, placed_quat = block_punch.place_scene(pos, quat, jnp.asarray(self.scene_ref[:2]), anchor)
        rows = jnp.asarray(self.opponent.mocap_ids)
        return data.replace(
            mocap_pos=data.mocap_pos.at[rows].set(
                jnp.where(face, placed_pos, pos + jnp.asarray(self.park_offset))
            ),
            mocap_quat=data.mocap_quat.at[rows].set(jnp.where(face, placed_quat, quat)),
        )

    def _scripted_ctrl(self, table: punches.PunchTable, punch, at, spec=None) -> jax.Array:
        """(U,) the simulated opponent's scripted PD targets at control step `at` of `punch`: the table's
        row, or the procedural `spec`'s when given."""
        return table.ctrl[punch, at] if spec is None else self._spec_ctrl(spec, at)

    def _spec_ctrl(self, spec: procedural.PunchSpec, frame) -> jax.Array:
        """(U,) the opponent's PD targets at control step `frame` of a procedural punch: his guard's (in the
        punch's stance) with the bank's joints set, clipped to their actuators' ranges."""
        opp, cols = self.opponent, self.bank_cols
        joints = procedural.joints_at(spec, frame * self.config.control_dt_s)
        lo, hi = opp.ctrl_range[cols, 0], opp.ctrl_range[cols, 1]
        guard = jnp.asarray(self.stances.ctrl)[spec.southpaw]
        return guard.at[cols].set(jnp.clip(joints, lo, hi))

    def _drive_opponent(
        self, data: mjx.Data, ctrl: jax.Array, face, anchor: jax.Array, southpaw=None
    ) -> mjx.Data:
        """The simulated opponent's PD targets set to `ctrl` (U,), his root anchor (in the `southpaw` stance
        when given) moved with the scene to `anchor` in face episodes (`place_scene`), else parked."""
        pos = jnp.asarray(self.arena.anchor_pos, jnp.float32)[None]
        quat = jnp.asarray(self.arena.anchor_quat, jnp.float32)[None]
        if southpaw is not None:
            pos = jnp.asarray(self.stances.root_pos)[southpaw, None]
            quat = jnp.asarray(self.stances.root_quat)[southpaw, None]
        placed_pos, placed_quat = block_punch.place_scene(pos, quat, jnp.asarray(self.scene_ref[:2]), anchor)
        row = self.arena.anchor_mocap
        opp = jnp.asarray(self.opponent.actuator_ids)
        return data.replace(
            ctrl=data.ctrl.at[opp].set(ctrl),
            mocap_pos=data.mocap_pos.at[row].set(
                jnp.where(face, placed_pos[0], pos[0] + jnp.asarray(self.park_offset))
            ),
            mocap_quat=data.mocap_quat.at[row].set(jnp.where(face, placed_quat[0], quat[0])),
        )

    def _drive(self, data: mjx.Data, action, info: BlockInfo) -> mjx.Data:
        """Our PD targets: the episode's reference pose plus the scaled action, clipped to the ranges."""
        me = self.me
        lo, hi = jnp.asarray(me.ctrl_range[:, 0]), jnp.asarray(me.ctrl_range[:, 1])
        offset = self.config.action_scale_rad * action[jnp.asarray(me.action_group)]
        ctrl = data.ctrl.at[jnp.asarray(me.actuator_ids)].set(jnp.clip(info.pose_ref + offset, lo, hi))
        return data.replace(ctrl=ctrl)

    def _shove(self, data: mjx.Data, info: BlockInfo, key: jax.Array) -> tuple[mjx.Data, jax.Array]:
        """The shove episode's kick of our root, on its step: (data, () float32 shoved)."""
        k_dir, k_speed = jax.random.split(key)
        shoved = ((info.kind == SHOVE) & (info.step == info.shove_step)).astype(jnp.float32)
        angle = jax.random.uniform(k_dir, (), jnp.float32, -jnp.pi, jnp.pi)
        speed = jax.random.uniform(k_speed, (), jnp.float32, *self.config.shove_speed_mps)
        kick = shoved * speed * jnp.stack([jnp.cos(angle), jnp.sin(angle)])
        v = self.me.dof_adr
        return data.replace(qvel=data.qvel.at[v : v + 2].add(kick)), shoved

    def _task(self, data: mjx.Data, info: BlockInfo, fell: jax.Array):
        """Unweighted reward terms, events and info updates of the command, walk, bag and shove kinds
        (`block_kinds.kind_task`) from stepped `data`."""
        pose = functools.partial(vision.pose_capsules, data.geom_xpos, data.geom_xmat)
        glove_sites = data.site_xpos[jnp.asarray(self.arm_ik.glove_site_ids)]
        return block_kinds.kind_task(
            self.config,
            info,
            fell,
            data.qpos[self.me.qpos_adr : self.me.qpos_adr + 7],
            glove_sites - data.xpos[self.arm_ik.head_body],
            pose(self.gloves),
            pose(self.bag),
        )

    def _punch_capsules(self, data) -> tuple[vision.Capsules, vision.Capsules]:
        """The opponent's gloves and our blockers (gloves, forearms) posed as capsules in `data`."""
        pose = functools.partial(vision.pose_capsules, data.geom_xpos, data.geom_xmat)
        return pose(self.opponent_gloves), pose(self.blockers)

    def _score(
        self, data: mjx.Data, gloves: vision.Capsules, blockers: vision.Capsules, hand: jax.Array, target
    ) -> tuple[jax.Array, jax.Array]:
        """The opponent's `hand` glove against our `target` in `data` (`block_punch.judge_punch`): (score,
        gap m); with "scoring" ablated, (0, `NO_GAP_M`): every punch out of reach."""
        if "scoring" in self.config.ablate:
            return jnp.zeros((), jnp.float32), jnp.float32(block_punch.NO_GAP_M)
        goals = vision.pose_capsules(data.geom_xpos, data.geom_xmat, self.targets)
        return block_punch.judge_punch(gloves, goals, blockers, hand, target)

    def _see(self, data: mjx.Data) -> jax.Array:
        """(FRAME_SIZE,) what our fighter sees now (`vision.see`); zeros with "vision" ablated."""
        if "vision" in self.config.ablate:
            return jnp.zeros((vision.FRAME_SIZE,), jnp.float32)
        return vision.see(data, self.vision_index)

    def _observe(self, qpos, qvel, touch, info: BlockInfo, seen, bag_pos) -> jax.Array:
        """(observation_size,) float32 in the `obs_slices` layout."""
        me = self.me
        root_q, root_v = me.qpos_adr, me.dof_adr
        quat = qpos[root_q + 3 : root_q + 7]
        facing = self._facing(quat)
        kind = jax.nn.one_hot(info.kind, len(KINDS), dtype=jnp.float32)
        guard_arms = jnp.asarray(me.stance_ctrl[self.arm_act])
        command = jnp.concatenate(
            [
                jax.nn.one_hot(info.command, NUM_POSES, dtype=jnp.float32),
                info.command_offset.reshape(-1),
                info.pose_ref[jnp.asarray(self.arm_act)] - guard_arms,
            ]
        )
        spot = frames.to_heading_frame(
            facing, jnp.concatenate([info.spot - qpos[root_q : root_q + 2], jnp.zeros(1)])
        )
        walk = jnp.concatenate([spot[:2], jnp.linalg.norm(spot[:2], keepdims=True)])
        bag = frames.to_heading_frame(facing, bag_pos - qpos[root_q : root_q + 3])
        parts = [
            qpos[jnp.asarray(me.act_qpos_adr)],
            0.1 * qvel[jnp.asarray(me.act_dof_adr)],
            jnp.stack([qpos[root_q + 2] - self.guard_height]),
            rewards.gravity_in_frame(quat),
            rewards.quat_rotate_inverse(quat, qvel[root_v : root_v + 3]),
            0.25 * qvel[root_v + 3 : root_v + 6],
            touch / self.body_weight_n,
            info.prev_action,
            seen,
            kind,
            command * kind[COMMAND],
            walk * kind[WALK],
            bag * kind[BAG],
        ]
        return jnp.concatenate([jnp.asarray(p, jnp.float32).reshape(-1) for p in parts])

    def _facing(self, quat: jax.Array) -> jax.Array:
        """() the direction our fighter faces (rad about +z): the pelvis yaw less the guard's hip turn, as
        `boxjax.envs.walk.env.heading` (0 for the guard of the face episodes, looking at the opponent)."""
        return frames.yaw(quat) - self.guard_yaw

    def _rewards(self, data, touch, action, info: BlockInfo):
        """The unweighted terms every kind shares (around the episode's reference pose) and the fall flag."""
        cfg, me = self.config, self.me
        quat = data.qpos[me.qpos_adr + 3 : me.qpos_adr + 7]
        gravity = rewards.gravity_in_frame(quat)
        height = data.qpos[me.qpos_adr + 2]
        joints = data.qpos[jnp.asarray(me.act_qpos_adr)]
        pose_factor = jnp.where(
            info.kind == WALK, cfg.pose_weight_walk, jnp.where(info.kind == BAG, cfg.pose_weight_bag, 1.0)
        )
        terms = {  # unweighted (`weighted_terms` weighs them)
            "alive": jnp.float32(1.0),
            "pose": pose_factor * rewards.pose_tracking(joints, info.pose_ref, 0.05 * self.nu),
            "height": rewards.height_tracking(height, self.guard_height, 0.01),
            "upright": rewards.upright(gravity),
            "feet": rewards.feet_support(touch, self.body_weight_n),
            "action_rate": -rewards.action_rate(action, info.prev_action),
        }
        fell = (height < cfg.fall_height_fraction * self.guard_height) | (
            rewards.upright(gravity) < cfg.fall_upright_cos
        )
        return terms, fell.astype(jnp.float32)

    def metric_names(self) -> tuple[str, ...]:
        """Names of the per-step metrics every step returns (`State.metrics` keys), sorted."""
        names = [f"reward/{k}" for k in REWARD_TERMS] + list(self.backend.figure_names)
        names += [*EVENTS, *(f"success/{k}" for k in SUCCESS), *(f"kind/{k}" for k in KINDS), "fall", "nan"]
        names += list(block_opponent.METRICS) if self.learned else []
        return tuple(sorted(names))

    def _zero_metrics(self) -> dict[str, jax.Array]:
        return {k: jnp.zeros((), jnp.float32) for k in self.metric_names()}
