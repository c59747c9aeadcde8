"""Per-world work that only some worlds need, computed only for those under `vmap`.

An env step is written for one world and vmapped over the batch, where `lax.cond` turns into a select and
both branches run in every world. `where_active` keeps the per-world code and, through a custom batching
rule, runs the costly branch on the active worlds alone: their inputs gathered into a batch of fixed size
(`capacity`), the branch vmapped over it, its results scattered back. When more worlds are active than the
capacity holds, the whole batch takes the branch (a real `lax.cond` at the batch level), so the result is
the same either way; only the work differs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

SPREAD_SIGMAS = 4.0
"""Binomial standard deviations of headroom above the expected count of active worlds."""
SPARE_WORLDS = 8
"""Worlds of headroom added to that (small batches)."""


def capacity(worlds: int, share: float) -> int:
    """The gathered batch's size for `worlds` worlds of which a fraction `share` is expected to be active:
    the expected count plus `SPREAD_SIGMAS` binomial standard deviations and `SPARE_WORLDS`, at most
    `worlds` (a batch that outgrows it takes the full path: same result, more work)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be in [0, 1], got {share}")
    spread = SPREAD_SIGMAS * math.sqrt(worlds * share * (1.0 - share))
    return min(worlds, math.ceil(worlds * share + spread) + SPARE_WORLDS)


def where_active(active: jax.Array, fn: Callable, idle: Callable, *args: Any, share: float) -> Any:
    """`fn(*args)` where the () bool `active` holds, else `idle(*args)`, for one world: a real branch.

    Under `vmap`, `fn` runs only on the active worlds, gathered into a batch of `capacity(worlds, share)`
    (`share`: the fraction expected active, a Python float), `idle` on every world (keep it cheap: its
    results stand where `fn` did not run); more active worlds than that and every world takes `fn`, as
    before. `fn` and `idle` return pytrees of the same structure, shapes and dtypes.
    """
    return _rule(fn, idle, share)(active, *args)


def _rule(fn: Callable, idle: Callable, share: float) -> Callable:
    """The custom-batched function of `where_active` for these branches."""

    @jax.custom_batching.custom_vmap
    def one(active, *args):
        return jax.lax.cond(active, fn, idle, *args)

    @one.def_vmap
    def batched(worlds, in_batched, active, *args):
        axes = [jax.tree.map(lambda b: 0 if b else None, b) for b in in_batched[1:]]
        if not in_batched[0]:
            active = jnp.broadcast_to(active, (worlds,))
        size = capacity(worlds, share)
        out = jax.lax.cond(
            jnp.sum(active) > size,
            lambda: _every_world(fn, idle, active, args, axes),
            lambda: _gathered(fn, idle, active, args, axes, size),
        )
        return out, jax.tree.map(lambda _: True, out)

    return one


def _every_world(fn: Callable, idle: Callable, active: jax.Array, args: list, axes: list) -> Any:
    """`fn` on every world, `idle`'s results where not active (the plain vmapped select)."""
    ran, rest = jax.vmap(fn, in_axes=axes)(*args), jax.vmap(idle, in_axes=axes)(*args)
    return jax.tree.map(lambda a, b: jnp.where(_expand(active, a), a, b), ran, rest)


def _gathered(fn: Callable, idle: Callable, active: jax.Array, args: list, axes: list, size: int) -> Any:
    """`fn` on the first `size` active worlds (all of them: the caller checked the count), scattered over
    `idle`'s results; unbatched arguments (`axes` None) go to both unbatched."""
    worlds = active.shape[0]
    (index,) = jnp.nonzero(active, size=size, fill_value=worlds)
    rows = jnp.minimum(index, worlds - 1)
    picked = [
        jax.tree.map(lambda x, axis: x if axis is None else x[rows], arg, axis)
        for arg, axis in zip(args, axes, strict=True)
    ]
    ran, rest = jax.vmap(fn, in_axes=axes)(*picked), jax.vmap(idle, in_axes=axes)(*args)
    return jax.tree.map(lambda r, a: r.at[index].set(a, mode="drop"), rest, ran)


def _expand(mask: jax.Array, like: jax.Array) -> jax.Array:
    """(N,) mask shaped to broadcast against `like` (N, ...)."""
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))
