"""Data-parallel PPO over several devices with JAX's own distribution: one mesh axis, `shard_map`, `psum`.

The worlds are split evenly across the devices of a one-axis mesh (`AXIS`). The whole iteration is still
ONE compiled program: under `shard_map` every device steps its share of the worlds, computes GAE and
gradients on its own transitions, and the gradients, observation statistics, episode totals and figures
are all-reduced (`boxjax.rl.collectives`), so the parameters, optimiser, normaliser and curriculum stay
identical on every device. Minibatches: each device shuffles its own transitions; a gradient step
averages the devices' `minibatch_size / devices` slices, so the global minibatch is the config's.
Random draws are slices of the single-device draws, so with one minibatch per epoch the sharded iteration
reproduces the single-device one up to summation order.

Layout. The train state is replicated. Each leaf of the rollout state gets a leading device axis
(devices, ...) sharded over `AXIS`, so each device holds exactly what a one-device run of its worlds
would (including MuJoCo Warp's unbatched contact pool and counters). Checkpoints use the host layout of a
one-device run (`DataParallel.to_host`/`from_host`), so a run saved on 2 devices resumes on 1 and back.

MuJoCo Warp (``impl="warp"``):

* build the environment with ``num_worlds = num_envs / devices`` (`worlds_per_device`): the contact pool
  (``naconmax``) belongs to one device's worlds. A pool sized for all worlds also works, it only costs
  memory on every device;
* keep MJX's default graph mode (``GraphMode.WARP``): the staged modes fail under multi-device sharding
  (mujoco#3191), so `DataParallel` refuses them; ``GraphMode.JAX`` does not work with MuJoCo Warp at all;
* the env params (model, data template) are replicated once, before the first iteration, and never
  donated, so the buffers each device's captured CUDA graphs point at stay put.

Several hosts: call ``jax.distributed.initialize()`` in every process before anything else touches JAX
and use all devices (``num_devices=0``); `jax.devices()` then spans the hosts and the same program runs.
See docs/multi-gpu.md.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from boxjax.envs.base import Env
from boxjax.rl.collectives import Shards
from boxjax.rl.config import PPOConfig
from boxjax.rl.rollout import RolloutState, init_rollout
from boxjax.rl.train_step import IterationFn, TrainState, train_iteration

AXIS = "worlds"
"""The mesh axis the worlds are split along."""


def resolve_devices(num_devices: int) -> list[jax.Device]:
    """The first `num_devices` devices of `jax.devices()` (all of them for 0)."""
    available = jax.devices()
    if num_devices == 0:
        return list(available)
    if num_devices > len(available):
        raise ValueError(f"{num_devices} devices asked for, {len(available)} available: {available}")
    if jax.process_count() > 1 and num_devices != len(available):
        raise ValueError("a multi-host run uses all devices (num_devices=0 / --devices all)")
    return list(available[:num_devices])


def worlds_per_device(config: PPOConfig, num_devices: int) -> int:
    """Worlds each device steps (what a MuJoCo Warp environment's `num_worlds` should be: it sizes the
    contact pool that every world stepped in one call shares, so K seeds batched together (`num_seeds`)
    count K times)."""
    config.check_devices(num_devices)
    return config.num_envs * config.num_seeds // num_devices


def _shard_map(fn: Any, mesh: Mesh, in_specs: Any, out_specs: Any) -> Any:
    """`jax.shard_map` (jax >= 0.7; `jax.experimental.shard_map` before) without the replication check
    (`check_vma`, formerly `check_rep`): the collectives make the replicated outputs equal, and the
    tests check that they are."""
    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:
        from jax.experimental.shard_map import shard_map
    check = "check_vma" if "check_vma" in inspect.signature(shard_map).parameters else "check_rep"
    return shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **{check: False})


def check_graph_mode(env_params: Any) -> None:
    """Refuse MuJoCo Warp models in a staged graph mode, which fails when sharded (mujoco#3191)."""
    for node in jax.tree.leaves(env_params, is_leaf=lambda x: hasattr(x, "opt")):
        impl = getattr(getattr(node, "opt", None), "_impl", None)
        mode = getattr(impl, "graph_mode", None)
        if mode is not None and "STAGED" in str(getattr(mode, "name", mode)).upper():
            raise ValueError(
                f"MuJoCo Warp graph mode {mode} fails under multi-device sharding (mujoco#3191); "
                "use MJX's default (GraphMode.WARP)"
            )


def world_leaves(env: Env, env_params: Any, reset_every: int = 1, faces: bool = False) -> RolloutState:
    """RolloutState (`init_rollout` with `reset_every` and `faces`) of bools: True for leaves with a leading
    world axis, False for leaves shared by the worlds of a device (MuJoCo Warp's contact pool and counters,
    per-step scratch, the reset pool's age)."""
    key = jax.random.PRNGKey(0)
    one = jax.eval_shape(lambda: init_rollout(env, env_params, key, 1, reset_every=reset_every, faces=faces))
    two = jax.eval_shape(lambda: init_rollout(env, env_params, key, 2, reset_every=reset_every, faces=faces))
    return jax.tree.map(lambda a, b: a.shape != b.shape, one, two)


def refresh_scratch(world: RolloutState, restored: RolloutState, fresh: RolloutState) -> RolloutState:
    """`restored`, except shared (non-world) leaves whose shape differs from `fresh`'s one-device
    layout: a MuJoCo Warp contact pool sized for another device count is scratch, so the fresh one is
    used. A world leaf of another shape is an error (another `num_envs`)."""

    def pick(is_world: bool, old: Any, new: Any) -> Any:
        if np.shape(old) == np.shape(new):
            return old
        if is_world:
            raise ValueError(f"checkpoint world leaf of shape {np.shape(old)}, this run has {np.shape(new)}")
        return new

    return jax.tree.map(pick, world, restored, fresh)


def _assemble(host: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """A global array of `sharding` from the whole host value: each addressable device gets its slice
    as a fresh buffer (so no two leaves share one; the iteration donates them)."""
    index = sharding.addressable_devices_indices_map(host.shape)
    parts = [jax.device_put(np.array(host[i], copy=True), d) for d, i in index.items()]
    return jax.make_array_from_single_device_arrays(host.shape, sharding, parts)


def _fetch(x: jax.Array) -> np.ndarray:
    """The whole value of a global array on this host (all hosts must call it together when sharded
    across hosts)."""
    if x.is_fully_replicated:
        return np.asarray(x.addressable_data(0))
    if x.is_fully_addressable:
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


class DataParallel:
    """One run's data-parallel placement: mesh, layouts and the compiled iteration.

    Args:
      env: the environment (for MuJoCo Warp built with `worlds_per_device` worlds, see the module doc).
      config: PPO config; `num_envs` and `minibatch_size` must split evenly over the devices.
      env_params: the environment params (host or one device); replicated here once.
      devices: the devices, in mesh order.
    """

    def __init__(self, env: Env, config: PPOConfig, env_params: Any, devices: Sequence[jax.Device]):
        self.count = len(devices)
        self.worlds_per_device = worlds_per_device(config, self.count)
        check_graph_mode(env_params)
        self.env, self.config = env, config
        self.mesh = Mesh(np.asarray(devices), (AXIS,))
        self.shards = Shards(AXIS, self.count)
        self.replicated = NamedSharding(self.mesh, P())
        self.split = NamedSharding(self.mesh, P(AXIS))
        self.world = world_leaves(env, env_params, config.reset_every)
        self.env_params = self.replicate(env_params)

    def replicate(self, tree: Any) -> Any:
        """Every leaf copied to every device of the mesh (raw uint32 keys only, no typed keys)."""
        return jax.tree.map(lambda x: _assemble(np.asarray(x), self.replicated), tree)

    def init_rollout(self, key: jax.Array) -> RolloutState:
        """Fresh worlds on their devices, (devices, worlds_per_device, ...) per world leaf; the same worlds
        as `init_rollout(env, env_params, key, num_envs)` on one device."""
        n, shards, env = self.worlds_per_device, self.shards, self.env

        def per_device(key: jax.Array, env_params: Any) -> RolloutState:
            state = init_rollout(env, env_params, key, n, shards, self.config.reset_every)
            return jax.tree.map(lambda x: x[None], state)

        fn = jax.jit(_shard_map(per_device, self.mesh, (P(), P()), P(AXIS)))
        return fn(self.replicate(key), self.env_params)

    def host_template(self, key: jax.Array) -> RolloutState:
        """Shapes and dtypes (no placement) of the rollout state in the one-device (checkpoint) layout."""
        shapes = jax.eval_shape(
            lambda: init_rollout(
                self.env, self.env_params, key, self.config.num_envs, reset_every=self.config.reset_every
            )
        )
        return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), shapes)

    @functools.cached_property
    def iteration(self) -> IterationFn:
        """`train_iteration` over the mesh, jitted once, train and rollout states donated.

        Call it as `iteration(train_state, rollout_state, dp.env_params)` with states placed by this
        object (`replicate`, `init_rollout`, `from_host`).
        """
        env, config, shards = self.env, self.config, self.shards

        def per_device(ts: TrainState, rs: RolloutState, env_params: Any):
            rs = jax.tree.map(lambda x: x[0], rs)
            ts, rs, metrics = train_iteration(env, config, ts, rs, env_params, shards)
            return ts, jax.tree.map(lambda x: x[None], rs), metrics

        specs = (P(), P(AXIS), P())
        return jax.jit(_shard_map(per_device, self.mesh, specs, specs), donate_argnums=(0, 1))

    def to_host(
        self, train_state: TrainState, rollout_state: RolloutState
    ) -> tuple[TrainState, RolloutState]:
        """Both states as numpy in the one-device layout (world leaves (num_envs, ...); shared leaves
        from the first device), the layout checkpoints are written in."""

        def gather(is_world: bool, x: jax.Array) -> np.ndarray:
            if is_world:
                value = _fetch(x)
                return value.reshape((value.shape[0] * value.shape[1], *value.shape[2:]))
            return np.asarray(x.addressable_shards[0].data)[0]

        train = jax.tree.map(_fetch, train_state)
        return train, jax.tree.map(gather, self.world, rollout_state)

    def from_host(
        self, train_state: TrainState, rollout_state: RolloutState, fresh: RolloutState
    ) -> tuple[TrainState, RolloutState]:
        """Place states of the one-device layout (e.g. restored from a checkpoint) on the mesh.

        `fresh` (from `init_rollout`) supplies shared leaves whose stored shape does not fit this
        layout (a MuJoCo Warp contact pool sized for another device count: per-step scratch).
        """
        n = self.config.num_envs

        def place(is_world: bool, host: Any, new: jax.Array) -> jax.Array:
            host = np.asarray(host)
            if is_world:
                if host.shape[0] != n:
                    raise ValueError(f"checkpoint has {host.shape[0]} worlds, this run {n}")
                shape = (self.count, self.worlds_per_device, *host.shape[1:])
                return _assemble(host.reshape(shape), self.split)
            if host.shape != new.shape[1:]:
                return new
            return _assemble(np.broadcast_to(host, (self.count, *host.shape)), self.split)

        return self.replicate(train_state), jax.tree.map(place, self.world, rollout_state, fresh)

    @staticmethod
    def first_device(tree: Any) -> Any:
        """A replicated pytree as single-device arrays (for acting outside the mesh)."""
        return jax.tree.map(lambda x: x.addressable_data(0), tree)
