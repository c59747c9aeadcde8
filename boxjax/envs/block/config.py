"""What a block world is made of: the episode kinds and metric names, the task's config, and the pytrees of
its params, per-world state and the hand-over between a step's two halves (`env.BlockEnv`)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
from flax import struct
from mujoco import mjx

from boxjax.envs.base import TaskConfig
from boxjax.envs.block import ik, procedural, punches
from boxjax.envs.walk import teacher as teacher_lib
from boxjax.mjcf import budget
from boxjax.mjcf.boxer import BODIES
from boxjax.ranges import ANY, COSINE, COUNT, NON_NEGATIVE, POSITIVE, UNIT, Range

KINDS = ("face", "command", "walk", "bag", "shove")
WEIGHTS = (
    "w_alive", "w_pose", "w_height", "w_upright", "w_feet", "w_action_rate", "w_block", "w_hit", "w_command",
    "w_walk_progress", "w_walk_goal", "w_bag_reach", "w_bag_hit", "w_recover", "w_fall", "w_parry",
)  # fmt: skip
"""The reward weights of `BlockConfig`."""
"""Episode kinds, in one-hot and weight order."""
FACE, COMMAND, WALK, BAG, SHOVE = range(len(KINDS))
REWARD_TERMS = (
    "alive", "pose", "height", "upright", "feet", "action_rate", "block", "hit",
    "command", "walk_progress", "walk_goal", "bag_reach", "bag_hit", "recover", "parry",
)  # fmt: skip
"""The reward's terms: each is computed unweighted (a penalty negative) and weighted once by its config
field `w_<term>` (`weighted_terms`); the step's reward is their sum less `w_fall` on a fall, and each is
logged as `reward/<term>`."""
SUCCESS = ("blocks", "goals", "bag_hits", "recoveries", "commands_held")
EVENTS = (
    "punch/thrown", "punch/arrived", "punch/blocked", "punch/parried", "punch/missed", "punch/hit",
    "punch/clean", "punch/hit_score", "vision/hidden", "command/presses", "command/ik_residual_m",
    "command/glove_error_m", "walk/distance_m", "bag/hit_speed", "shove/shoved",
)  # fmt: skip
ABLATIONS = ("vision", "scoring", "ik")
"""Parts of the step a benchmark may leave out (`BlockConfig.ablate`): the rays (our fighter sees zeros),
the 19-path punch score (every punch scores 0), the command's presses and arm fit (the guard pose is the
target)."""
PUNCH_SOURCES = ("library", "procedural", "heldout", "heldout-southpaw")
"""Where the opponent's punches come from (`BlockConfig.punch_source`)."""
OPPONENTS = ("simulated", "puppet")
"""The opponent's kinds (`BlockConfig.opponent`)."""
OPPONENT_POLICIES = ("scripted", "learned")
"""Who moves the simulated opponent (`BlockConfig.opponent_policy`)."""
NUM_POSES = len(ik.GUARD_POSES)
TASK_FIELDS = (("kind", len(KINDS)), ("command", NUM_POSES + 6 + 8), ("walk", 3), ("bag", 3))
"""Task part of the observation: kind one-hot; command: the one-hot of the named pose nearest its targets,
the glove targets (2 x 3 from the head, in the pelvis heading frame) and fitted arm angles minus the
guard's (8); walk spot (forward, left, distance) and bag centre (from the pelvis), both in the facing
frame (`BlockEnv._facing`)."""


IK_DAMPING = Range(1e-3)
"""`BlockConfig.ik_damping`'s range: at 1e-3 the damped arm systems' smallest eigenvalue (1e-6) is still
resolved in float32; 0 would leave a singular arm pose's system without a factorisation."""


@dataclasses.dataclass(frozen=True)
class BlockConfig(TaskConfig):
    """Task settings of the block environment."""

    ablate: tuple[str, ...] = ()
    """Parts of the step left out, from `ABLATIONS` (benchmarks price each part; none in training)."""
    opponent: str = "simulated"
    """The opponent, one of `OPPONENTS`: "simulated", a second simulated fighter whose actuators track the
    punch library and whose pelvis is welded to the recorded root path (`boxjax.mjcf.sparring`), so a
    guard physically stops a punch; "puppet", mocap bodies replaying the recordings kinematically
    (`boxjax.mjcf.puppet`; our body's), whose glove passes through a guard and is judged by its touch."""
    opponent_body: str = "simple"
    """The simulated opponent's body. "simple" by default: he only throws the recorded punches (solved on
    "simple") and is seen and blocked through his bones, head and gloves, which every body shares; his
    muscles and fingers would only add physics (a second 89-DoF tree, muscle contacts against ours)."""
    opponent_freeze_idle: bool = False
    """Fix the simulated opponent's hinges that the punch library never moves (`punches.idle_hinges`: with
    the shipped library his neck, sideways lumbar and thorax, forearm roll, wrists and legs) in his body at
    the angles he holds (`boxjax.mjcf.freeze`): his tree shrinks from 43 to 18 dofs and the blocking iteration
    gets faster (docs/benchmarks.md), but his punches change: with those hinges' sway gone his gloves run
    up to 0.14 m from the full opponent's, and the shipped blocker blocks fewer of them (a lighter world, not
    the seed's: off by default)."""
    opponent_weld_timeconst_s: float = 0.02
    """Solref time constant of the weld holding the simulated opponent's pelvis to the recorded root path
    (MuJoCo's default stiffness: he sags 0.5 mm in the guard)."""
    opponent_policy: str = "scripted"
    """Who throws his punches, one of `OPPONENT_POLICIES`: "scripted", the punch source's PD targets alone;
    "learned", a second learner (`BlockEnv.agents`, `boxjax.envs.block.opponent`) whose action offsets
    those targets (the simulated opponent with every hinge only)."""
    opponent_offset_rad: float = 0.3
    """Learned opponent: his joint-target offset from the scripted punch's for an action of 1."""
    w_opponent_effort: float = 0.01
    """Learned opponent: weight of his effort cost (mean squared action) in his reward."""
    opponent_clean_bonus: float = 0.5
    """Learned opponent: his bonus for a clean hit, beside the hit's score."""
    kind_weights: tuple[float, ...] = (0.4, 0.2, 0.15, 0.15, 0.1)
    """Relative weights of the episode kinds, `KINDS` order (face, command, walk, bag, shove)."""
    action_scale_rad: float = 0.4
    """Joint-target offset from the reference pose for an action of 1."""
    init_noise_rad: float = 0.02
    """Uniform noise on our initial joint angles."""
    punch_library: str = ""
    """Punch library file; empty for the one shipped with the package."""
    punch_source: str = "library"
    """Where the opponent's punches come from, one of `PUNCH_SOURCES`: "library", the table of
    `punch_library` (the classic 36 by default); "procedural", a new punch drawn on the device at every
    throw from the training distribution (`boxjax.envs.block.procedural`: continuous speed, aim, distance,
    chamber, combinations, feints, both stances); "heldout", the shipped held-out set, drawn from ranges and
    a seed that training never uses (what `boxjax eval` reports); "heldout-southpaw", its southpaw twin (every
    punch from the mirrored stance, a seed of its own)."""
    punch_gap_s: tuple[float, float] = (0.3, 1.0)
    """Range of the random time the opponent waits in the guard before each punch."""
    vision_delay_s: float = 0.1
    """Age of the vision frame the policy sees."""
    arrival_lag_s: float = 0.2
    """A punch is judged this long after its impact frame, on its glove's closest approach to the target
    since it was thrown (a simulated glove driven by force-limited joints lands up to ~0.2 s after the
    recording's impact frame; the puppet's is on target at it)."""
    reach_m: float = 0.1
    """A punch whose glove stops farther than this from the target's surface scores 0."""
    block_max_score: float = 0.25
    """An arriving punch scoring at most this is a block; above it, a hit."""
    clean_hit_score: float = 0.75
    """A hit scoring at least this is clean; below it, partly through."""
    touch_margin_m: float = 0.01
    """The opponent's glove touched our guard when its swept centre came within the two radii plus this."""
    opponent_contact_timeconst_s: float = 0.2
    """Puppet only: solref time constant of the puppet's colliding geoms (`boxjax.mjcf.puppet`; MuJoCo
    averages it with our fighter's 0.02 s, an effective 0.11 s at 0.2): a clean hit on a fighter standing
    passively in the guard then peaks at ~100-200 N and does not floor him; with the default 0.02 s on both
    sides it peaks at ~2 kN and keeps pushing (a kinematic glove cannot be stopped)."""
    opponent_follow_mps: float = 1.0
    """In face episodes the opponent stays on our fighter: the recorded scene (punches and guard, recorded
    against our fighter standing at the guard keyframe) is moved at up to this speed toward where the
    recording's head lands on ours (floor position) while he waits between punches (a punch keeps the aim
    it started with), so stepping or leaning out of reach only lasts until his next punch (with no gap
    between punches, `punch_gap_s` (0, 0), he never re-aims). 0 pins him where the recording puts him."""
    opponent_turn_radps: float = 3.0
    """In face episodes the opponent's recorded scene turns with our pelvis' heading at up to this rate
    (0: never turned)."""
    opponent_park_m: tuple[float, float] = (0.0, -6.0)
    """Where the opponent stands (x, y) outside face episodes."""
    teacher: str = ""
    """Walking teacher run beside the policy (policy distillation, pulling the leg actions): '' none,
    'shipped' the package's for this body (`boxjax.envs.walk.teacher.shipped_teacher`), a teacher file or
    walk checkpoint directory, or 'untrained' (fresh weights: a trained one's cost, for benchmarks of bodies
    without one). Its weight is `PPOConfig.distill_coef`."""
    ik_iterations: int = 12
    """Damped-least-squares steps of the first press's arm fit, at reset."""
    ik_iterations_per_step: int = 1
    """Damped-least-squares steps of the arm fit in every control step of a command episode, warm-started
    from the last step's angles and posed from the stepped torso (`ik.track_arms`): a press's new targets
    are fitted over its first steps, and the fit follows the torso as it moves."""
    ik_damping: float = 0.05
    """Damping of those steps (at least `IK_DAMPING`'s floor: the damped system must stay well conditioned
    in float32, whose Cholesky `ik.solve_spd` takes no pivoting)."""
    press_interval_s: tuple[float, float] = (1.0, 2.0)
    """Range of the random time from one block press to the next in command episodes (the first is at
    reset); each press names new glove targets."""
    command_jitter_m: float = 0.03
    """The guard region the targets are drawn from: random blends of the named guard poses
    (`ik.GUARD_POSES`), each glove target jittered by up to this per axis."""
    command_tolerance_m: float = 0.05
    """A glove this close to its target counts as on target..."""
    command_hold_s: float = 0.5
    """...and both gloves on target this long is a command held (once per press)."""
    walk_origin_m: tuple[float, float] = (-3.0, 0.0)
    """Where walk episodes start (x, y), clear of the bag."""
    walk_distance_m: tuple[float, float] = (0.5, 2.0)
    """Range of the spot's distance from the start."""
    walk_arrive_m: float = 0.15
    """The spot is reached within this distance of the pelvis (floor plane)."""
    walk_speed_mps: float = 0.6
    """Speed of the teacher's velocity command (`BlockEnv.teacher_command`); the progress reward's scale."""
    bag_distance_m: tuple[float, float] = (0.6, 0.75)
    """Range of the distance from our pelvis to the bag's axis in bag episodes."""
    bag_touch_m: float = 0.02
    """A glove within this gap of the bag's surface touches it."""
    bag_hit_speed_mps: float = 1.5
    """A touch is a hit when the glove came in at least this fast (toward the bag's axis)."""
    shove_at_s: tuple[float, float] = (0.3, 1.0)
    """Range of the time of the shove in shove episodes."""
    shove_speed_mps: tuple[float, float] = (0.8, 1.5)
    """Range of the horizontal root-velocity kick of the shove."""
    recover_s: float = 2.0
    """Standing this long after the shove is a recovery."""
    fall_height_fraction: float = 0.65
    """A fall: root below this fraction of its guard height..."""
    fall_upright_cos: float = 0.5
    """...or the pelvis tilted past arccos of this."""
    w_alive: float = 1.0
    """Per-step survival bonus."""
    w_pose: float = 0.5
    """Weight of staying near the reference pose."""
    pose_weight_walk: float = 0.2
    """Factor on `w_pose` in walk episodes (the legs must leave the guard)."""
    pose_weight_bag: float = 0.2
    """Factor on `w_pose` in bag episodes (the arms must leave the guard to punch)."""
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
    w_parry: float = 0.0
    """Bonus for each punch parried (stopped by a touch of our gloves or forearms on the glove's way), on
    top of `w_block`: a block on the guard valued over a stop out of reach, which scores no hit either
    (0: the seed's reward, the step's sum unchanged bit for bit)."""
    w_command: float = 1.0
    """Weight of the gloves' closeness to the command's targets."""
    w_walk_progress: float = 1.0
    """Weight of the speed toward the spot, over `walk_speed_mps` (clipped to [-1, 1])."""
    w_walk_goal: float = 5.0
    """Bonus for reaching the spot (once)."""
    w_bag_reach: float = 0.2
    """Weight of the nearer glove's closeness to the bag."""
    w_bag_hit: float = 2.0
    """Bonus per bag hit, times its speed over `bag_hit_speed_mps` (at most 2)."""
    w_recover: float = 5.0
    """Bonus for a recovery."""
    w_fall: float = 10.0
    """Penalty on the step that falls."""

    AS_BUILT: ClassVar[dict[str, Any]] = {
        **TaskConfig.AS_BUILT,
        "opponent_freeze_idle": False,
        "punch_source": "library",
        "opponent_policy": "scripted",
        "opponent_offset_rad": 0.3,
        "w_opponent_effort": 0.01,
        "opponent_clean_bonus": 0.5,
        "w_parry": 0.0,
    }
    """As `TaskConfig.AS_BUILT`: runs from before an option existed (every hinge of his simulated, his punches
    scripted) describe themselves as before."""

    RANGES = {
        "kind_weights": NON_NEGATIVE,
        "action_scale_rad": POSITIVE,
        "init_noise_rad": NON_NEGATIVE,
        "punch_gap_s": Range(0.0, pair=True),
        "vision_delay_s": NON_NEGATIVE,
        "arrival_lag_s": NON_NEGATIVE,
        "reach_m": NON_NEGATIVE,
        "block_max_score": UNIT,
        "clean_hit_score": UNIT,
        "touch_margin_m": NON_NEGATIVE,
        "opponent_weld_timeconst_s": POSITIVE,
        "opponent_contact_timeconst_s": POSITIVE,
        "opponent_follow_mps": NON_NEGATIVE,
        "opponent_offset_rad": POSITIVE,
        "w_opponent_effort": NON_NEGATIVE,
        "opponent_clean_bonus": NON_NEGATIVE,
        "opponent_turn_radps": NON_NEGATIVE,
        "opponent_park_m": ANY,
        "ik_iterations": COUNT,
        "ik_iterations_per_step": COUNT,
        "ik_damping": IK_DAMPING,
        "press_interval_s": Range(0.0, pair=True),
        "command_jitter_m": NON_NEGATIVE,
        "command_tolerance_m": POSITIVE,
        "command_hold_s": NON_NEGATIVE,
        "walk_origin_m": ANY,
        "walk_distance_m": Range(0.0, pair=True),
        "walk_arrive_m": POSITIVE,
        "walk_speed_mps": POSITIVE,
        "bag_distance_m": Range(0.0, pair=True),
        "bag_touch_m": NON_NEGATIVE,
        "bag_hit_speed_mps": POSITIVE,
        "shove_at_s": Range(0.0, pair=True),
        "shove_speed_mps": Range(0.0, pair=True),
        "recover_s": POSITIVE,
        "fall_height_fraction": UNIT,
        "fall_upright_cos": COSINE,
        "pose_weight_walk": NON_NEGATIVE,
        "pose_weight_bag": NON_NEGATIVE,
        **{name: NON_NEGATIVE for name in WEIGHTS},
    }

    def __post_init__(self) -> None:
        """Reject unknown bodies and bad values, naming the field and its valid range."""
        super().__post_init__()
        if len(self.kind_weights) != len(KINDS) or sum(self.kind_weights) <= 0:
            raise ValueError(
                f"BlockConfig.kind_weights needs {len(KINDS)} weights >= 0 ({', '.join(KINDS)}) "
                f"with a positive sum, got {self.kind_weights}"
            )
        if self.opponent not in OPPONENTS:
            raise ValueError(
                f"BlockConfig.opponent: unknown {self.opponent!r}; valid: {', '.join(OPPONENTS)}"
            )
        if self.punch_source not in PUNCH_SOURCES:
            raise ValueError(
                f"BlockConfig.punch_source: unknown {self.punch_source!r}; valid: {', '.join(PUNCH_SOURCES)}"
            )
        self._check_opponent_policy()
        if self.opponent_body not in BODIES:
            raise ValueError(
                f"BlockConfig.opponent_body: unknown body {self.opponent_body!r}; valid: {', '.join(BODIES)}"
            )
        unknown = sorted(set(self.ablate) - set(ABLATIONS))
        if unknown:
            raise ValueError(f"BlockConfig.ablate: unknown parts {unknown}; valid: {', '.join(ABLATIONS)}")

    def _check_opponent_policy(self) -> None:
        """Reject an unknown `opponent_policy`, and a learned one for an opponent without every hinge."""
        if self.opponent_policy not in OPPONENT_POLICIES:
            raise ValueError(
                f"BlockConfig.opponent_policy: unknown {self.opponent_policy!r}; "
                f"valid: {', '.join(OPPONENT_POLICIES)}"
            )
        if self.opponent_policy == "learned" and (self.opponent != "simulated" or self.opponent_freeze_idle):
            raise ValueError(
                "BlockConfig.opponent_policy='learned' needs the simulated opponent with every hinge "
                f"(opponent='simulated', opponent_freeze_idle=false; got opponent={self.opponent!r}, "
                f"opponent_freeze_idle={self.opponent_freeze_idle})"
            )

    def contact_budget(self) -> budget.ContactBudget:
        """Slots of one block world: both fighters and the opponent's weld (`budget.world_budget`), or our
        fighter and the puppet."""
        return budget.world_budget(self.body, self.opponent_body if self.opponent == "simulated" else None)

    def to_dict(self) -> dict:
        """JSON-friendly copy; `ablate` only when something is left out, so a full run's description is
        that of the runs from before ablations existed (their checkpoints still resume)."""
        out = super().to_dict()
        if not self.ablate:
            del out["ablate"]
        return out


@struct.dataclass
class BlockParams:
    """Everything a block step reads that is not static (passed in, never closed over)."""

    model: Any
    """The physics backend's model (`Backend.put_model`; None on MuJoCo's C engine)."""
    template: Any
    """One world in the guard: both fighters placed (or the puppet posed), PD targets of the guard."""
    punches: punches.PunchTable
    guard_vision: jax.Array
    """(FRAME_SIZE,) what our fighter sees in the guard: the vision frames before the first step."""
    ik_model: mjx.Model
    """The arena on MJX's JAX implementation, for the command's arm fit (its kinematics)."""
    kind_weights: jax.Array
    """(len(KINDS),) relative weights of the episode kinds."""
    teacher: teacher_lib.Teacher | None = None
    """The walking teacher (`BlockConfig.teacher`), None without one."""
    bank: procedural.Bank | None = None
    """Procedural and held-out punches: the keyframe bank (None with the library's table)."""
    draws: procedural.DrawTable | None = None
    """Held-out punches: the set's draws (None otherwise)."""


@struct.dataclass
class BlockInfo:
    """Per-world task state."""

    step: jax.Array
    """() int32 control steps since reset."""
    kind: jax.Array
    """() int32 episode kind (`KINDS`)."""
    pose_ref: jax.Array
    """(nu,) the episode's reference joint angles: the PD base of the action and the pose reward's target."""
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
    command: jax.Array
    """() int32 the named guard pose nearest the current press's targets (`ik.GUARD_POSES` order)."""
    command_offset: jax.Array
    """(2, 3) the current press's glove targets (left, right) from the head, in the heading frame."""
    ik_residual: jax.Array
    """() metres the fitted arms miss the worse glove's target by."""
    next_press: jax.Array
    """() int32 step of the next block press (command episodes)."""
    hold: jax.Array
    """() int32 consecutive steps with both gloves on target."""
    held: jax.Array
    """() float32 1 once the current press was held."""
    spot: jax.Array
    """(2,) walk target on the floor (world x, y)."""
    spot_distance: jax.Array
    """() pelvis-to-spot distance after the last step."""
    reached: jax.Array
    """() float32 1 once the spot was reached this episode."""
    glove_pos: jax.Array
    """(2, 3) glove centres after the last step."""
    glove_vel: jax.Array
    """(2, 3) mean glove velocity over the last step."""
    touching: jax.Array
    """(2,) float32 gloves touching the bag after the last step."""
    punch_glove: jax.Array
    """(3,) the opponent's punching glove after the last step (the start of its next sweep)."""
    parried: jax.Array
    """() float32 1 once the current punch's glove touched our guard on its way."""
    punch_gap: jax.Array
    """() metres of the current punch's closest approach so far (glove to target surface; `NO_GAP_M`
    before it is thrown)."""
    punch_score: jax.Array
    """() its 19-path score at that closest approach."""
    opponent_anchor: jax.Array
    """(3,) where the opponent's recorded scene stands for the next step (`follow_anchor`, updated after each
    step while he waits in the guard): the floor point (x, y) the recording's reference (our pelvis at the
    guard keyframe) is moved to, and its turn about z (rad)."""
    shove_step: jax.Array
    """() int32 step of the shove (shove episodes)."""
    key: jax.Array
    """PRNG key of this world."""
    spec: procedural.PunchSpec | None = None
    """Procedural and held-out punches: the current (or next) punch; `punch` is then its held-out row."""
    draw: procedural.Draw | None = None
    """...and the draw it was made from (a sequence's next punch follows from it)."""
    opponent_view: jax.Array | None = None
    """Learned opponent: (max(delay_steps, 1), `opponent.VIEW_SIZE`) ring buffer of his view of our fighter,
    delayed as our vision (`slot` is its oldest frame too); None with the scripted one."""


@struct.dataclass
class StepDraws:
    """What the first half of a step (`BlockEnv.before_physics`) hands to the second (`after_physics`)."""

    punch: jax.Array
    """() int32 the opponent's punch after his clock advanced."""
    frame: jax.Array
    """() int32 its control step (negative while he waits)."""
    shoved: jax.Array
    """() float32 1.0 where the shove kicked our root this step."""
    key: jax.Array
    """The world's PRNG key for the next step."""
    spec: procedural.PunchSpec | None = None
    """Procedural and held-out punches: the punch after the clock advanced."""
    draw: procedural.Draw | None = None
    """...and its draw."""


def weighted_terms(config: BlockConfig, terms: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """Every `REWARD_TERMS` entry of the unweighted `terms`, times its weight `config.w_<term>`."""
    return {name: getattr(config, f"w_{name}") * terms[name] for name in REWARD_TERMS}
