"""`boxjax.envs.subset.where_active`: under vmap, the branch runs on the active worlds alone (gathered up to
a capacity, the whole batch when more are active), with the same results as the plain per-world select."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from boxjax.envs import subset

WORLDS = 64
SHARE = 0.1


def _solve(x, m):
    return jnp.linalg.solve(m @ m.T + jnp.eye(3), x), jnp.sum(x)


def _keep(x, m):
    return x, jnp.zeros(())


def _reference(active, x, m):
    """The plain vmapped select: both branches in every world."""
    ran, kept = jax.vmap(_solve)(x, m), jax.vmap(_keep)(x, m)
    return jax.tree.map(lambda a, b: jnp.where(active.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), ran, kept)


def _inputs():
    x = jax.random.normal(jax.random.PRNGKey(0), (WORLDS, 3))
    m = jax.random.normal(jax.random.PRNGKey(1), (WORLDS, 3, 3))
    return x, m


def _active(count: int) -> jax.Array:
    return jax.random.permutation(jax.random.PRNGKey(2), jnp.arange(WORLDS) < count)


@jax.jit
def _batched(active, x, m):
    return jax.vmap(lambda a, x, m: subset.where_active(a, _solve, _keep, x, m, share=SHARE))(active, x, m)


def test_capacity_holds_the_expected_share_with_headroom_and_names_a_bad_share():
    assert subset.capacity(WORLDS, SHARE) == 24  # 6.4 + 4 x 2.4 -> 17, + 8
    assert subset.capacity(2048, 0.2) == 491 and subset.capacity(8, 0.2) == 8 and subset.capacity(100, 0) == 8
    with pytest.raises(ValueError, match="share must be in"):
        subset.capacity(8, 1.5)


@pytest.mark.parametrize("count", [0, 5, 24, 25, WORLDS], ids=["none", "few", "full", "overflow", "all"])
def test_batched_equals_the_plain_select(count):
    """In one gathered chunk (count up to the capacity, 24) or several (more): bit for bit the plain
    select."""
    x, m = _inputs()
    active = _active(count)
    for got, want in zip(
        jax.tree.leaves(_batched(active, x, m)), jax.tree.leaves(_reference(active, x, m)), strict=True
    ):
        np.testing.assert_array_equal(got, want)


def test_the_branch_runs_on_the_active_worlds_only():
    """A host callback in the branch sees one gathered batch (the capacity), or as many as the active
    worlds need past it: 40 active worlds take two batches of 24."""
    seen = []

    def counted(x, m):
        jax.debug.callback(lambda n: seen.append(np.size(n)), jnp.sum(x))
        return _solve(x, m)

    def run(count):
        seen.clear()
        f = jax.vmap(lambda a, x, m: subset.where_active(a, counted, _keep, x, m, share=SHARE))
        jax.block_until_ready(f(_active(count), *_inputs()))
        return sum(seen)

    assert run(5) == subset.capacity(WORLDS, SHARE)
    assert run(40) == 2 * subset.capacity(WORLDS, SHARE)
    assert run(0) == 0


def test_unbatched_and_mixed_arguments_nested_vmap_and_one_world():
    x, m = _inputs()
    active = _active(10)
    got = jax.vmap(lambda a, x: subset.where_active(a, _solve, _keep, x, m[0], share=SHARE))(active, x)
    want = _reference(active, x, jnp.broadcast_to(m[0], m.shape))
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(g, w)

    def from_dict(d):
        return _solve(d["x"], d["m"])

    def keep_dict(d):
        return _keep(d["x"], d["m"])

    mixed = jax.vmap(
        lambda a, x: subset.where_active(a, from_dict, keep_dict, {"x": x, "m": m[0]}, share=SHARE)
    )(active, x)
    for g, w in zip(jax.tree.leaves(mixed), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(g, w)
    nested = jax.vmap(jax.vmap(lambda a, x, m: subset.where_active(a, _solve, _keep, x, m, share=0.2)))(
        active.reshape(4, 16), x.reshape(4, 16, 3), m.reshape(4, 16, 3, 3)
    )
    for g, w in zip(jax.tree.leaves(nested), jax.tree.leaves(_reference(active, x, m)), strict=True):
        np.testing.assert_array_equal(g.reshape(w.shape), w)
    one = subset.where_active(jnp.array(False), _solve, _keep, x[0], m[0], share=SHARE)
    np.testing.assert_array_equal(one[0], x[0])
