"""A collector: one CPU environment (K worlds in one `mujoco.batch.Batch`) and the policy.

Each control step makes one batched policy forward for all K worlds (`rollout.sample_action`, the GPU
path's code, jitted) and one environment step, and writes the experience straight into this collector's
columns of the shared (T, N) rollout slot. Episode totals and per-step figures are summed on the way.
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
import numpy as np

from boxjax.envs.base import NONFINITE_METRIC
from boxjax.envs.cpu import CpuEnv
from boxjax.models.networks import ActorCritic
from boxjax.rl.config import PPOConfig
from boxjax.rl.cpu.buffers import BufferNames, Buffers, EnvSizes
from boxjax.rl.ppo import Policy
from boxjax.rl.rollout import Transition, sample_action
from boxjax.rl.train_step import make_network

EnvFactory = Callable[[int, int, int], CpuEnv]
"""(num_worlds, num_threads, seed) -> a CPU environment; must pickle (it travels to the collectors)."""


@dataclasses.dataclass(frozen=True)
class Collected:
    """One collector's report on one iteration (host numbers)."""

    episodes: float
    """Episodes that ended."""
    terminated: float
    """Of those, episodes that ended by a fall."""
    return_sum: float
    """Sum of their returns."""
    length_sum: float
    """Sum of their lengths in control steps."""
    metric_sums: dict[str, float]
    """Per-step figures summed over steps and worlds."""
    samples: int
    """Steps x worlds collected."""
    step_s: float
    """Seconds in the environment step (physics and task)."""
    policy_s: float
    """Seconds in the policy forward (with its transfers)."""
    collect_s: float
    """Seconds for the whole iteration."""
    wait_s: float = 0.0
    """Seconds the collector sat idle before this iteration's command."""


def _act(net: ActorCritic, normalize: bool, params, normalizer, obs, key, iteration, step):
    key = jax.random.fold_in(jax.random.fold_in(key, iteration), step)
    return sample_action(net, params, normalizer, obs, key, normalize)


class Collector:
    """Steps one environment with the policy, one iteration at a time (see the module docstring)."""

    def __init__(self, env: CpuEnv, net: ActorCritic, normalize: bool, key: jax.Array):
        self.env = env
        self.key = key
        self.obs = env.reset()
        self.episode_return = np.zeros(env.num_worlds, np.float32)
        self.episode_length = np.zeros(env.num_worlds, np.float32)
        self._act = jax.jit(functools.partial(_act, net, normalize))

    def collect(self, policy: Policy, curriculum: Any, iteration: int, out: Transition) -> Collected:
        """Fill `out` ((T, K) numpy views) with T steps of every world under `policy`."""
        tick = time.perf_counter()
        policy = jax.device_put(policy)  # once, not at every step
        self.env.apply_curriculum(curriculum)
        totals = np.zeros(4)  # episodes, terminated, return_sum, length_sum
        sums: dict[str, np.ndarray] = {}
        step_s = policy_s = 0.0
        unroll = out.reward.shape[0]
        for t in range(unroll):
            t0 = time.perf_counter()
            if out.distill_target is not None:  # the teacher's targets on the state acted on
                out.distill_target[t], out.distill_mask[t] = self.env.distill_target()
            raw, log_prob, action = self._act(
                policy.params, policy.normalizer, self.obs, self.key, iteration, t
            )
            raw, log_prob, action = np.asarray(raw), np.asarray(log_prob), np.asarray(action)
            t1 = time.perf_counter()
            step = self.env.step(action)
            t2 = time.perf_counter()
            policy_s, step_s = policy_s + t1 - t0, step_s + t2 - t1
            out.obs[t], out.action[t], out.log_prob[t] = self.obs, raw, log_prob
            out.reward[t], out.next_obs[t], out.done[t] = step.reward, step.next_obs, step.done
            bad = step.metrics.get(NONFINITE_METRIC, np.zeros_like(step.done)) > 0.5
            if bad.any():  # as `wrappers.neutralize`: bootstrapped from the observation before the step
                out.next_obs[t][bad] = self.obs[bad]
            out.termination[t] = step.done * (1.0 - step.truncation)
            self.episode_return += step.reward
            self.episode_length += 1.0
            if step.done.any():
                d = step.done * ~bad  # an episode cut short by non-finite physics is not counted
                totals += (
                    d.sum(),
                    out.termination[t].sum(),
                    (d * self.episode_return).sum(),
                    (d * self.episode_length).sum(),
                )
                keep = 1.0 - step.done
                self.episode_return *= keep
                self.episode_length *= keep
            for k, v in step.metrics.items():
                sums[k] = sums[k] + v if k in sums else v.astype(np.float64)
            self.obs = step.obs
        return Collected(
            *(float(x) for x in totals),
            metric_sums={k: float(v.sum()) for k, v in sums.items()},
            samples=unroll * self.env.num_worlds,
            step_s=step_s,
            policy_s=policy_s,
            collect_s=time.perf_counter() - tick,
        )


@dataclasses.dataclass(frozen=True)
class CollectorSpec:
    """Everything a collector process needs (picklable)."""

    index: int
    """Collector number: its columns of the rollout are [index * worlds, (index + 1) * worlds)."""
    env_factory: EnvFactory
    worlds: int
    threads: int
    """MuJoCo threads of its batch."""
    seed: int
    sizes: EnvSizes
    config: PPOConfig
    buffers: BufferNames


class CollectorWorker:
    """A collector attached to the shared buffers: `handle` one iteration's command."""

    def __init__(self, spec: CollectorSpec):
        env = spec.env_factory(spec.worlds, spec.threads, spec.seed + spec.index)
        net = make_network(spec.sizes, spec.config)
        key = jax.random.fold_in(jax.random.PRNGKey(spec.seed), spec.index)
        self.collector = Collector(env, net, spec.config.normalize_observations, key)
        self.buffers = Buffers.attach(spec.buffers, spec.sizes, spec.config)
        lo = spec.index * spec.worlds
        self.out = [
            jax.tree.map(lambda x, lo=lo: x[:, lo : lo + spec.worlds], tree.view())
            for tree in self.buffers.rollout
        ]

    def handle(self, iteration: int, updates: int, curriculum: Any) -> Collected:
        """Collect iteration `iteration` into its rollout slot with the policy after `updates` updates (a
        published one: `iteration` in serial mode, `iteration - 1` while the learners update, decoupled)."""
        policy = self.buffers.policy[updates % len(self.buffers.policy)].read()
        slot = iteration % len(self.out)
        return self.collector.collect(policy, curriculum, iteration, self.out[slot])

    def close(self) -> None:
        """Detach from the buffers."""
        self.out = []
        self.buffers.close()


def serve(conn: Connection, spec: CollectorSpec) -> None:
    """A collector process's loop: ("collect", iteration, updates, curriculum) -> ("collected", iteration,
    report)."""
    try:
        worker = CollectorWorker(spec)
        conn.send(("ready", spec.index))
        idle_since = time.perf_counter()
        while True:
            message = conn.recv()
            if message[0] == "stop":
                break
            _, iteration, updates, curriculum = message
            wait_s = time.perf_counter() - idle_since
            report = dataclasses.replace(worker.handle(iteration, updates, curriculum), wait_s=wait_s)
            conn.send(("collected", iteration, report))
            idle_since = time.perf_counter()
        worker.close()
    except EOFError:  # the coordinator is gone: nothing left to do
        return
    except Exception:
        conn.send(("error", traceback.format_exc()))
        raise
