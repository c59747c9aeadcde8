"""The CPU path's shared-memory buffers: what each holds, and one place that creates and names them.

Every buffer has two slots, so one side writes iteration i + 1 while the other reads iteration i:

* ``rollout[i % 2]``: the (T, N) `Transition` of iteration i, each collector writing its own columns;
* ``policy[i % 2]``: the `Policy` (parameters, observation statistics) after i updates, which the
  collectors act with;
* ``state[i % 2]``: the learner's `LearnerState` (parameters, optimiser, statistics) after i updates,
  which the learners start from and the coordinator checkpoints.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from boxjax.models.networks import Normalizer
from boxjax.rl.config import PPOConfig
from boxjax.rl.cpu.shm import SharedTree
from boxjax.rl.ppo import Policy
from boxjax.rl.rollout import Transition
from boxjax.rl.train_step import TrainState, init_train_state

SLOTS = 2


@dataclasses.dataclass(frozen=True)
class EnvSizes:
    """What the learner's code needs to know of an environment (it never builds one)."""

    observation_size: int
    action_size: int


@struct.dataclass
class LearnerState:
    """The part of the `TrainState` the learners own (the coordinator owns curriculum, counter and key)."""

    params: Any
    opt_state: Any
    normalizer: Normalizer

    @classmethod
    def of(cls, train_state: TrainState) -> LearnerState:
        """The learner's part of `train_state`."""
        return cls(
            params=train_state.params, opt_state=train_state.opt_state, normalizer=train_state.normalizer
        )

    def policy(self) -> Policy:
        """What the collectors act with."""
        return Policy(params=self.params, normalizer=self.normalizer)


def state_template(sizes: EnvSizes, config: PPOConfig) -> LearnerState:
    """Shapes and dtypes of a `LearnerState` (no computation)."""
    train = jax.eval_shape(lambda: init_train_state(sizes, config, jax.random.PRNGKey(0)))
    return LearnerState.of(train)


def rollout_template(sizes: EnvSizes, config: PPOConfig) -> Transition:
    """Shapes and dtypes of one iteration's (T, N) experience."""
    t, n = config.unroll_length, config.num_envs

    def spec(*shape: int) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct((t, n, *shape), jnp.float32)

    obs = spec(sizes.observation_size)
    distill = spec(sizes.action_size) if config.distill_coef > 0 else None
    return Transition(
        obs=obs,
        action=spec(sizes.action_size),
        log_prob=spec(),
        reward=spec(),
        next_obs=obs,
        termination=spec(),
        done=spec(),
        distill_target=distill,
        distill_mask=distill,
    )


@dataclasses.dataclass(frozen=True)
class BufferNames:
    """System-wide names of every slot (picklable: it travels to the worker processes)."""

    rollout: tuple[str, ...]
    policy: tuple[str, ...]
    state: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Buffers:
    """Every slot of every buffer, attached in this process."""

    rollout: tuple[SharedTree, ...]
    policy: tuple[SharedTree, ...]
    state: tuple[SharedTree, ...]

    @classmethod
    def create(cls, sizes: EnvSizes, config: PPOConfig) -> Buffers:
        """New zeroed buffers (this process owns them: `close` removes them)."""
        state = state_template(sizes, config)
        return cls(
            rollout=tuple(SharedTree.create(rollout_template(sizes, config)) for _ in range(SLOTS)),
            policy=tuple(SharedTree.create(state.policy()) for _ in range(SLOTS)),
            state=tuple(SharedTree.create(state) for _ in range(SLOTS)),
        )

    @classmethod
    def attach(cls, names: BufferNames, sizes: EnvSizes, config: PPOConfig) -> Buffers:
        """The buffers another process created."""
        state = state_template(sizes, config)
        rollout = rollout_template(sizes, config)
        return cls(
            rollout=tuple(SharedTree.attach(n, rollout) for n in names.rollout),
            policy=tuple(SharedTree.attach(n, state.policy()) for n in names.policy),
            state=tuple(SharedTree.attach(n, state) for n in names.state),
        )

    @property
    def names(self) -> BufferNames:
        """The names to attach these buffers elsewhere."""
        return BufferNames(*(tuple(t.name for t in getattr(self, f)) for f in ("rollout", "policy", "state")))

    def publish(self, iteration: int, state: LearnerState) -> None:
        """Write the learner state and policy after `iteration` updates into their slots."""
        self.state[iteration % SLOTS].write(state)
        self.policy[iteration % SLOTS].write(state.policy())

    def close(self) -> None:
        """Drop every mapping (and remove the blocks, when this process created them)."""
        for tree in (*self.rollout, *self.policy, *self.state):
            tree.close()
