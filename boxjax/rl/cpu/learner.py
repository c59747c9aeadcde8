"""The CPU path's learner: the GPU path's PPO update, split over L learner processes.

The loss code is the GPU path's: `train_step.advantages_and_batch` (values and GAE), `train_step.minibatches`
(one permutation per epoch), `train_step.minibatch_loss` (the loss of one minibatch, also in bf16),
`train_step.guarded_step` (the KL-adapted optimiser step, applied only when finite) and
`guard.finite_or` (the update's result, kept only when finite).
What differs is the loop: each minibatch is one jitted gradient call, then (with L > 1) one all-reduce of
the flat gradient across the learners, then one jitted optimiser step, so the all-reduce can be timed.

With L learners every one of them computes the observation statistics, values and GAE of the whole
batch (a forward pass, cheap next to the update) and the same permutation; learner r then takes rows
[r * M / L, (r + 1) * M / L) of each minibatch of M rows. Advantages are normalised with the statistics
of the whole minibatch, so the mean of the L gradients is the gradient of the serial update: L learners
give the serial result up to float rounding.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from boxjax.models.networks import ActorCritic, Normalizer
from boxjax.rl import guard
from boxjax.rl.config import PPOConfig
from boxjax.rl.cpu.buffers import BufferNames, Buffers, EnvSizes, LearnerState
from boxjax.rl.losses import LossBatch, LossTerms
from boxjax.rl.rollout import Transition
from boxjax.rl.train_step import (
    advantages_and_batch,
    guarded_step,
    learning_rate,
    make_network,
    make_optimizer,
    minibatch_loss,
    minibatches,
)

DTYPES = {"fp32": jnp.float32, "bf16": jnp.bfloat16}
"""Arithmetic of the learner's forward and backward passes (parameters and optimiser stay float32)."""

TERM_NAMES = tuple(f.name for f in dataclasses.fields(LossTerms))

AllReduce = Callable[[jax.Array], jax.Array]
"""Mean of a flat float32 array over the learners (every learner gets the same result)."""


@dataclasses.dataclass(frozen=True)
class LearnTimes:
    """Where a learner's iteration went (seconds)."""

    update_s: float
    """The whole update: statistics, GAE, every epoch and minibatch."""
    allreduce_s: float
    """Of which waiting for gradient all-reduces."""


class Learner:
    """One learner of L (see the module docstring)."""

    def __init__(
        self,
        net: ActorCritic,
        config: PPOConfig,
        dtype: str = "fp32",
        rank: int = 0,
        learners: int = 1,
        allreduce: AllReduce | None = None,
    ):
        if dtype not in DTYPES:
            raise ValueError(f"unknown learner dtype {dtype!r}; valid: {', '.join(DTYPES)}")
        if config.minibatch_size % learners:
            raise ValueError(
                f"minibatch_size {config.minibatch_size} must be a multiple of learners {learners}"
            )
        if (learners > 1) != (allreduce is not None):
            raise ValueError("an all-reduce is needed exactly when there are several learners")
        self.net, self.config, self.dtype = net, config, DTYPES[dtype]
        self.rank, self.learners, self.allreduce = rank, learners, allreduce
        self._normalizer = jax.jit(_guarded_normalizer_update)
        self._batch = jax.jit(functools.partial(advantages_and_batch, net, config))
        self._shuffle = jax.jit(self._local_minibatches)
        self._grads = jax.jit(self._flat_gradient)
        self._apply = jax.jit(self._apply_gradient)
        self._finite_or = jax.jit(guard.finite_or)

    def learn(
        self, state: LearnerState, traj: Transition, key: jax.Array
    ) -> tuple[LearnerState, dict, LearnTimes]:
        """One iteration's update of `state` on the (T, N) experience `traj` (numpy or JAX).

        Returns:
          the new state, the loss terms averaged over all gradient steps (and the step size after the
          update, "learning_rate"), and the times.
        """
        tick = time.perf_counter()
        cfg = self.config
        state, traj = jax.device_put((state, traj))  # once, not at every call
        normalizer = state.normalizer  # as in the fused iteration: the statistics the rollout acted with
        batch = self._batch(state.params, normalizer, traj)
        params, opt_state = state.params, state.opt_state
        terms, flags, allreduce_s = [], [], 0.0
        for epoch_key in jax.random.split(key, cfg.num_epochs):
            local, advantage = self._shuffle(batch, epoch_key)
            for j in range(cfg.num_minibatches):
                flat = self._grads(params, normalizer, local, advantage, j)
                if self.allreduce is not None:
                    flat.block_until_ready()
                    t0 = time.perf_counter()
                    flat = self.allreduce(flat).block_until_ready()
                    allreduce_s += time.perf_counter() - t0
                params, opt_state, step_terms, step_flags = self._apply(params, opt_state, flat)
                terms.append(step_terms)
                flags.append(step_flags)
        (params, opt_state), finite = self._finite_or((params, opt_state), (state.params, state.opt_state))
        flags = np.stack(jax.device_get(flags))  # (steps, flags): loss, gradients, applied
        applied = flags[:, -1] * float(finite)
        means = np.stack(jax.device_get(terms))[applied > 0].mean(axis=0) if applied.any() else None
        figures = {
            guard.PREFIX + k: float(v) for k, v in zip(STEP_FLAGS, flags[:, :-1].sum(axis=0), strict=True)
        }
        figures[guard.PREFIX + "parameters"] = 1.0 - float(finite)
        figures[guard.SKIPPED_STEPS] = float(len(applied) - applied.sum())
        figures[guard.UPDATE_SKIPPED] = float(not applied.any())
        if cfg.normalize_observations:
            normalizer, stats_ok = self._normalizer(normalizer, traj.obs)
            figures[guard.PREFIX + "observation_statistics"] = float(not stats_ok)
        figures[guard.PREFIX + "observations"] = float(not np.all(np.isfinite(np.asarray(traj.obs))))
        new_state = LearnerState(params=params, opt_state=opt_state, normalizer=normalizer)
        jax.block_until_ready(new_state)
        times = LearnTimes(update_s=time.perf_counter() - tick, allreduce_s=allreduce_s)
        terms = {name: 0.0 if means is None else float(x) for name, x in zip(TERM_NAMES, means, strict=True)}
        terms["learning_rate"] = float(learning_rate(opt_state))
        return new_state, {**terms, **figures}, times

    # -- jitted pieces ----------------------------------------------------------------------------------
    def _local_minibatches(self, batch: LossBatch, key: jax.Array) -> tuple[LossBatch, jax.Array]:
        """This learner's rows of each minibatch (NMB, M / L, ...) and the whole minibatches' advantages."""
        shuffled = minibatches(batch, key, self.config.num_minibatches)
        rows = self.config.minibatch_size // self.learners
        lo = self.rank * rows
        return jax.tree.map(lambda x: x[:, lo : lo + rows], shuffled), shuffled.advantage

    def _flat_gradient(
        self, params: Any, normalizer: Normalizer, local: LossBatch, advantage: jax.Array, j: jax.Array
    ) -> jax.Array:
        """Gradient of minibatch `j`'s loss on this learner's rows, flat, then the loss terms."""
        cfg = self.config
        mb = jax.tree.map(lambda x: x[j], local)
        if cfg.normalize_advantages:
            whole = advantage[j]
            mb = mb.replace(advantage=(mb.advantage - whole.mean()) / (whole.std() + 1e-8))

        def loss_fn(p: Any) -> tuple[jax.Array, LossTerms]:
            return minibatch_loss(
                self.net, cfg, p, normalizer, mb, normalize_advantages=False, compute_dtype=self.dtype
            )

        grads, terms = jax.grad(loss_fn, has_aux=True)(params)
        return jnp.concatenate([ravel_pytree(grads)[0], jnp.stack([getattr(terms, n) for n in TERM_NAMES])])

    def _apply_gradient(
        self, params: Any, opt_state: Any, flat: jax.Array
    ) -> tuple[Any, Any, jax.Array, jax.Array]:
        """One optimiser step with the flat (all-reduced) gradient, its step size first adapted to the
        minibatch's KL as on the GPU path, skipped when not finite (`train_step.step_flags`); returns the
        loss terms that trail the gradient and the step's flags (`STEP_FLAGS`, then 1.0 if applied)."""
        size = sum(x.size for x in jax.tree.leaves(params))
        _, unravel = ravel_pytree(params)
        terms = flat[size:]
        kl = terms[TERM_NAMES.index("approx_kl")]
        grads, optimizer = unravel(flat[:size]), make_optimizer(self.config)
        total = terms[TERM_NAMES.index("total")]
        params, opt_state, flags, applied = guarded_step(
            self.config, optimizer, params, opt_state, grads, kl, total
        )
        return params, opt_state, terms, jnp.stack([*(flags[k] for k in STEP_FLAGS), applied])


STEP_FLAGS = ("loss", "gradients")
"""The per-step guard flags of `train_step.step_flags`, in the order `Learner` stacks them."""


def _guarded_normalizer_update(normalizer: Normalizer, obs: jax.Array) -> tuple[Normalizer, jax.Array]:
    """`normalizer` having taken in `obs`, kept as it was when the result is not finite; (it, finite?)."""
    return guard.finite_or(normalizer.update(obs), normalizer)


def make_allreduce(learners: int) -> AllReduce:
    """Mean over the `learners` processes of a `jax.distributed` CPU job (gloo collectives)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()), ("learner",))
    stacked = NamedSharding(mesh, PartitionSpec("learner"))
    mean = jax.jit(lambda x: x.mean(axis=0), out_shardings=NamedSharding(mesh, PartitionSpec()))

    def allreduce(flat: jax.Array) -> jax.Array:
        whole = jax.make_array_from_single_device_arrays((learners, flat.size), stacked, [flat[None]])
        return mean(whole).addressable_data(0)

    return allreduce


@dataclasses.dataclass(frozen=True)
class LearnerSpec:
    """Everything a learner process needs (picklable)."""

    rank: int
    learners: int
    dtype: str
    sizes: EnvSizes
    config: PPOConfig
    buffers: BufferNames


class LearnerWorker:
    """A learner attached to the shared buffers: `handle` one iteration's update."""

    def __init__(self, spec: LearnerSpec):
        net = make_network(spec.sizes, spec.config)
        allreduce = make_allreduce(spec.learners) if spec.learners > 1 else None
        self.learner = Learner(net, spec.config, spec.dtype, spec.rank, spec.learners, allreduce)
        self.buffers = Buffers.attach(spec.buffers, spec.sizes, spec.config)
        self.rank = spec.rank

    def handle(self, iteration: int, key: np.ndarray) -> tuple[dict, LearnTimes]:
        """Update on iteration `iteration`'s rollout from the state after `iteration` updates.

        Learner 0 publishes the new state and policy into the slots of `iteration + 1`.
        """
        slot = iteration % len(self.buffers.state)
        state = self.buffers.state[slot].read()
        traj = self.buffers.rollout[slot].view()
        state, terms, times = self.learner.learn(state, traj, jnp.asarray(key))
        if self.rank == 0:
            self.buffers.publish(iteration + 1, jax.device_get(state))
        return terms, times

    def close(self) -> None:
        """Detach from the buffers."""
        self.buffers.close()


def serve(conn: Connection, spec: LearnerSpec) -> None:
    """A learner process's loop: ("learn", iteration, key) -> ("learned", iteration, terms, times)."""
    try:
        worker = LearnerWorker(spec)
        conn.send(("ready", spec.rank))
        while True:
            message = conn.recv()
            if message[0] == "stop":
                break
            _, iteration, key = message
            terms, times = worker.handle(iteration, key)
            conn.send(("learned", iteration, terms, times))
        worker.close()
    except EOFError:  # the coordinator is gone: nothing left to do
        return
    except Exception:
        conn.send(("error", traceback.format_exc()))
        raise
