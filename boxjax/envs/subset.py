"""Per-world work that only some worlds need, computed only for those under `vmap`.

An env step is written for one world and vmapped over the batch, where `lax.cond` turns into a select and
both branches run in every world. `where_active` keeps the per-world code and, through a custom batching
rule, runs the costly branch on the active worlds alone: their inputs gathered into a batch of fixed size
(`capacity`), the branch vmapped over it, its results scattered back. When more worlds are active than the
capacity holds, further chunks of that size follow (a loop at the batch level), so the result is the same
either way; only the work differs, and the branch is compiled once.
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
    `worlds` (more active worlds take further batches of this size: same result, more work)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be in [0, 1], got {share}")
    spread = SPREAD_SIGMAS * math.sqrt(worlds * share * (1.0 - share))
    return min(worlds, math.ceil(worlds * share + spread) + SPARE_WORLDS)


def where_active(active: jax.Array, fn: Callable, idle: Callable, *args: Any, share: float) -> Any:
    """`fn(*args)` where the () bool `active` holds, else `idle(*args)`, for one world: a real branch.

    Under `vmap`, `fn` runs only on the active worlds, gathered into a batch of `capacity(worlds, share)`
    (`share`: the fraction expected active, a Python float), `idle` on every world (keep it cheap: its
    results stand where `fn` did not run); more active worlds than that take further batches of that size.
    `fn` and `idle` return pytrees of the same structure, shapes and dtypes.
    """
    return _rule(fn, idle, share)(active, *args)


def _rule(fn: Callable, idle: Callable, share: float) -> Callable:
    """The custom-batched function of `where_active` for these branches."""

    @jax.custom_batching.custom_vmap
    def one(active, *args):
        return jax.lax.cond(active, fn, idle, *args)

    @one.def_vmap
    def batched(worlds, in_batched, active, *args):
        leaves, tree = jax.tree.flatten(args)
        axes = [0 if b else None for b in jax.tree.leaves(in_batched[1:])]
        if not in_batched[0]:
            active = jnp.broadcast_to(active, (worlds,))
        out = _in_chunks(
            _on_leaves(fn, tree), _on_leaves(idle, tree), active, leaves, axes, capacity(worlds, share)
        )
        return out, jax.tree.map(lambda _: True, out)

    return one


def _on_leaves(branch: Callable, tree: Any) -> Callable:
    """`branch` taking its arguments' leaves: the batch is mapped leaf by leaf, so no argument's pytree class
    (an MJX model, say) is rebuilt with `None` axes, which some classes flatten differently."""
    return lambda *leaves: branch(*jax.tree.unflatten(tree, leaves))


def _in_chunks(fn: Callable, idle: Callable, active: jax.Array, leaves: list, axes: list, size: int) -> Any:
    """`idle` on every world, then `fn` on the active ones in chunks of `size` gathered worlds, scattered
    back: one chunk unless more than `size` are active (a loop of as many as needed, so `fn` is compiled
    once, at the chunk's size). Unbatched leaves (`axes` None) go to both unbatched."""
    worlds = active.shape[0]
    chunks = -(-worlds // size)
    (order,) = jnp.nonzero(active, size=chunks * size, fill_value=worlds)  # active worlds first
    out = jax.vmap(idle, in_axes=axes)(*leaves)

    def chunk(j, out):
        index = jax.lax.dynamic_slice(order, (j * size,), (size,))
        rows = jnp.minimum(index, worlds - 1)
        picked = [x if axis is None else x[rows] for x, axis in zip(leaves, axes, strict=True)]
        ran = jax.vmap(fn, in_axes=axes)(*picked)
        return jax.tree.map(lambda r, a: r.at[index].set(a, mode="drop"), out, ran)

    return jax.lax.fori_loop(0, (jnp.sum(active) + size - 1) // size, chunk, out)
