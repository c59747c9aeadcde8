"""PPO configuration: one frozen dataclass, variants made with `dataclasses.replace`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from boxjax.models.checkpoint import current_ppo_fields
from boxjax.models.distributions import DISTRIBUTIONS
from boxjax.models.networks import INITS, NORMALIZERS
from boxjax.ranges import COUNT, NON_NEGATIVE, POSITIVE, UNIT, Range, check_fields

_LATER_FIELDS = {
    "distill_coef": 0.0,
    "reset_every": 1,
    "restart_on_draw": False,
    "gae_window": 0,
    "action_distribution": "clipped_normal",
    "network_init": "orthogonal",
    "obs_normalizer": "boxjax",
    "batch_layout": "transitions",
    "num_seeds": 1,
    "frozen_agents": (),
    "agent_turn_iterations": 0,
    "pool_size": 0,
    "pool_every": 50,
    "pool_share": 0.5,
}
"""Fields added after checkpoints were first written, with the value that means "absent": `to_dict` leaves
them out at that value so the stored config (compared on resume) of older runs still matches."""
BATCH_LAYOUTS = ("transitions", "unrolls")
"""`PPOConfig.batch_layout` values: single transitions (GAE once per iteration), or Brax's whole unrolls."""


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Hyper-parameters and sizes of one PPO run."""

    num_envs: int = 2048
    """Worlds stepped in parallel."""
    unroll_length: int = 16
    """Control steps each world takes per iteration."""
    num_epochs: int = 4
    """Passes over the iteration's batch."""
    minibatch_size: int = 2048
    """Transitions per gradient step."""
    learning_rate: float = 3e-4
    """Adam step size (the starting one when `desired_kl` adapts it)."""
    desired_kl: float = 0.01
    """Adapt the step size per minibatch toward this approximate KL (divide by 1.5 above twice it, multiply
    by 1.5 below half of it); 0 keeps `learning_rate` fixed."""
    learning_rate_bounds: tuple[float, float] = (1e-5, 1e-2)
    """Range the adapted step size stays in."""
    gamma: float = 0.99
    """Discount per control step."""
    gae_lambda: float = 0.95
    """GAE trace decay."""
    clip_eps: float = 0.2
    """PPO ratio clip."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    entropy_coef: float = 1e-3
    """Weight of the entropy bonus."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip."""
    policy_hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the policy MLP."""
    value_hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the value MLP."""
    init_log_std: float = -0.7
    """Initial log standard deviation of the Gaussian policy (not of the "tanh_normal" distribution)."""
    normalize_advantages: bool = True
    """Standardise advantages per minibatch."""
    normalize_observations: bool = True
    """Keep running observation statistics and feed normalised observations to the networks."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before GAE."""
    num_devices: int = 1
    """Devices the worlds are split across (data-parallel, `boxjax.rl.sharding`); 0 = all devices."""
    distill_coef: float = 0.0
    """Weight of the distillation loss toward the env's `distill_target` (policy distillation from a
    teacher); 0, or an env without the hook, leaves PPO exactly as without it."""

    reset_every: int = 1
    """Iterations a draw of reset states serves: the states finished worlds restart from are drawn for
    every world once per `reset_every` iterations (`boxjax.rl.rollout.reset_states`). 1 draws them every
    iteration; more saves the reset's cost where it is long, for less varied starts."""
    restart_on_draw: bool = False
    """Every world also restarts from each draw of reset states (its running episode cut, not counted), as
    Brax's PPO resets all its environments after each epoch of training steps when `num_resets_per_eval`
    > 0; False: a world restarts only when its episode ends. The episode figures (and a task's curriculum)
    then see only the episodes that end before a restart."""
    action_distribution: str = "clipped_normal"
    """The policy's action distribution (`boxjax.models.distributions.DISTRIBUTIONS`): "clipped_normal", a
    normal with one learnt log std (`init_log_std`), its samples clipped to [-1, 1]; or "tanh_normal", Brax's:
    a tanh-squashed normal whose scale the policy MLP gives beside its mean (softplus + 0.001, about 0.69 at
    the start), its entropy estimated at a fresh sample with the tanh's log-Jacobian (not with distillation:
    the teacher's target is for an unsquashed mean)."""
    gae_window: int = 0
    """Control steps per GAE window: the advantage recursion restarts every that many steps of the unroll,
    each window bootstrapping from the value of the state it reached, as Brax's PPO computes GAE per
    unroll when it collects several unrolls per update; 0 = one window, the whole unroll. Must divide
    `unroll_length`."""

    network_init: str = "orthogonal"
    """Weight initialisation of both networks (`boxjax.models.networks.INITS`): orthogonal, or Brax's
    lecun-uniform on every layer."""
    obs_normalizer: str = "boxjax"
    """How observations are normalised (`boxjax.models.networks.NORMALIZERS`) and when the statistics take
    in a rollout's observations: "boxjax" (std floored at 0.1, clipped at ±10; after the gradient steps, so
    the update sees the statistics the rollout acted with) or "brax", Brax's PPO's (floored at 1e-6, not
    clipped, unit std before any data; before the gradient steps with a fixed step size, after them when
    `desired_kl` adapts it)."""
    batch_layout: str = "transitions"
    """What a minibatch holds (`BATCH_LAYOUTS`): "transitions", single transitions with GAE computed once per
    iteration; or "unrolls", Brax's update layout (`boxjax.rl.unrolls`): whole unrolls of `gae_window` steps,
    whose advantages are computed in the loss with the current value network at every gradient step
    (`losses.brax_gae`: truncated steps masked, the policy-gradient advantage r + gamma (lambda-return of
    s') - V(s)); one device, no distillation."""
    num_seeds: int = 1
    """Independent seeds trained side by side in one compiled program (`boxjax.rl.seeds`), each with its own
    networks, optimiser, normaliser, worlds and keys; seed 0 is the plain run of the key. One device, the
    fused path."""
    frozen_agents: tuple[str, ...] = ()
    """Agents of an env with several learners (`boxjax.rl.agents`) that never learn: their models stay as
    they started, bit for bit (an opponent learning against a fixed blocker, say)."""
    agent_turn_iterations: int = 0
    """With several learners: 0, every agent not frozen updates every iteration; N > 0, they take turns in
    the env's order (frozen ones skipped), N iterations each, the others frozen meanwhile."""
    pool_size: int = 0
    """With several learners, a pool against cycling (fictitious self-play, `boxjax.rl.agents`): snapshots of
    every agent's model kept in the program, the oldest replaced first; 0, no pool."""
    pool_every: int = 50
    """Iterations between two snapshots into the pool (the first at iteration 0)."""
    pool_share: float = 0.5
    """The chance that a world, at each reset, has one of its agents (drawn evenly) played by a snapshot
    (drawn evenly from the pool) until its next reset; that agent learns nothing from that world."""

    RANGES: ClassVar[dict[str, Range]] = {
        "num_envs": COUNT,
        "unroll_length": COUNT,
        "num_epochs": COUNT,
        "minibatch_size": COUNT,
        "learning_rate": POSITIVE,
        "desired_kl": NON_NEGATIVE,
        "learning_rate_bounds": Range(0.0, open_low=True, pair=True),
        "gamma": UNIT,
        "gae_lambda": UNIT,
        "clip_eps": POSITIVE,
        "value_coef": NON_NEGATIVE,
        "entropy_coef": NON_NEGATIVE,
        "max_grad_norm": POSITIVE,
        "policy_hidden": COUNT,
        "value_hidden": COUNT,
        "init_log_std": Range(-20.0, 5.0),
        "reward_scale": POSITIVE,
        "num_devices": Range(0, integer=True),
        "distill_coef": NON_NEGATIVE,
        "reset_every": COUNT,
        "gae_window": Range(0, integer=True),
        "num_seeds": COUNT,
        "agent_turn_iterations": Range(0, integer=True),
        "pool_size": Range(0, integer=True),
        "pool_every": COUNT,
        "pool_share": UNIT,
    }
    """Valid range of each numeric field (`boxjax.ranges`)."""

    def __post_init__(self) -> None:
        """Reject values that would silently produce a wrong run, naming the field and its valid range."""
        check_fields(self, self.RANGES)
        if self.batch_size % self.minibatch_size:
            raise ValueError(
                f"PPOConfig: batch_size (num_envs*unroll_length = {self.batch_size}) must be a multiple of "
                f"minibatch_size ({self.minibatch_size})"
            )
        choices = (
            ("action_distribution", DISTRIBUTIONS),
            ("batch_layout", BATCH_LAYOUTS),
            ("network_init", INITS),
            ("obs_normalizer", NORMALIZERS),
        )
        for name, valid in choices:
            if getattr(self, name) not in valid:
                raise ValueError(
                    f"PPOConfig.{name} {getattr(self, name)!r} is not one of: {', '.join(valid)}"
                )
        if self.action_distribution == "tanh_normal" and self.distill_coef > 0:
            raise ValueError(
                f"PPOConfig: the tanh_normal action distribution does not take distillation (distill_coef "
                f"{self.distill_coef}): the teacher's target is for an unsquashed mean"
            )
        if self.gae_window and self.unroll_length % self.gae_window:
            raise ValueError(
                f"PPOConfig: gae_window ({self.gae_window}) must divide unroll_length ({self.unroll_length})"
            )
        if self.batch_layout == "unrolls":
            self._check_unrolls()
        low, high = self.learning_rate_bounds
        if not low <= self.learning_rate <= high:
            raise ValueError(
                f"PPOConfig.learning_rate ({self.learning_rate}) must lie in learning_rate_bounds "
                f"{self.learning_rate_bounds}"
            )
        if self.num_devices > 1:
            self.check_devices(self.num_devices)
        if self.num_seeds > 1 and self.num_devices != 1:
            raise ValueError(
                f"PPOConfig.num_seeds ({self.num_seeds}) > 1 runs on one device (num_devices "
                f"{self.num_devices}): the seed axis is not split over devices"
            )

    def _check_unrolls(self) -> None:
        """Refuse what the "unrolls" batch layout cannot take, naming it."""
        if not self.gae_window or self.minibatch_size % self.gae_window:
            raise ValueError(
                f"PPOConfig.batch_layout 'unrolls' needs a gae_window (the unroll, {self.gae_window}) > 0 "
                f"that divides minibatch_size ({self.minibatch_size})"
            )
        if self.distill_coef > 0:
            raise ValueError(
                f"PPOConfig.batch_layout 'unrolls' does not take distillation (distill_coef "
                f"{self.distill_coef})"
            )
        if self.num_devices != 1:
            raise ValueError(
                f"PPOConfig.batch_layout 'unrolls' runs on one device (num_devices {self.num_devices})"
            )

    def check_devices(self, count: int) -> None:
        """Reject a device count that does not split the worlds and the minibatch evenly."""
        for name in ("num_envs", "minibatch_size"):
            if getattr(self, name) % count:
                value = getattr(self, name)
                raise ValueError(
                    f"PPOConfig.{name} ({value}) must be a multiple of the device count ({count})"
                )

    @property
    def stats_before_update(self) -> bool:
        """Whether an iteration's observations enter the statistics before its gradient steps (Brax's
        normaliser with a fixed step size) rather than after them."""
        return self.obs_normalizer == "brax" and self.desired_kl <= 0

    @property
    def batch_size(self) -> int:
        """Transitions collected per iteration."""
        return self.num_envs * self.unroll_length

    @property
    def num_minibatches(self) -> int:
        """Gradient steps per epoch."""
        return self.batch_size // self.minibatch_size

    def to_dict(self) -> dict:
        """JSON-friendly copy (tuples become lists; `_LATER_FIELDS` left out at their neutral value)."""
        return {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(self).items()
            if not (k in _LATER_FIELDS and v == _LATER_FIELDS[k])
        }

    @classmethod
    def from_dict(cls, values: dict) -> PPOConfig:
        """Inverse of `to_dict` (flags since renamed read as their typed choice, `current_ppo_fields`);
        unknown keys are an error."""
        values = current_ppo_fields(values)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"PPOConfig: unknown fields {sorted(unknown)}; valid: {sorted(names)}")
        fixed = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        return cls(**fixed)
