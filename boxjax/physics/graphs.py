"""Counting what the GPU physics ran: the CUDA graphs MuJoCo Warp captures (after warm-up a training
iteration should capture none) and the factorisations our kernel ran (`fused_factorizations`).

In MJX's default graph mode on a GPU (`GraphMode.WARP`) each of MJX's Warp callables keeps the CUDA graphs
it captured, keyed on the buffer addresses of the call, and replays one when XLA hands it the same buffers
again. Other addresses mean a new capture, far slower than a replay (MuJoCo's docs measured a humanoid at
0.80 M steps/s with a capture every step against 2.96 M with replays). These functions count captures by
their keys, so a program that keeps handing MuJoCo Warp fresh buffers shows up as captures in every
iteration. The staged modes (`PhysicsConfig.graph_mode`) capture once per call site into fixed buffers and
keep no such keys, so they count zero. On a CPU (or with `impl="jax"`) there are no such callables and
every count is zero.
"""

from __future__ import annotations

import sys


def warp_callables() -> list:
    """MJX's Warp FFI callables registered so far in this process (empty before MJX-Warp ran or traced)."""
    ffi = sys.modules.get("mujoco.mjx.warp.ffi")
    registry = getattr(ffi, "_JAX_CALLABLE_VARIADIC_TUPLE_REGISTRY", {}) if ffi else {}
    return list(registry.values())


def capture_keys(callables: list | None = None) -> frozenset:
    """The keys of every CUDA graph the callables (default: `warp_callables()`) hold now."""
    found = warp_callables() if callables is None else callables
    return frozenset((id(c), key) for c in found for key in getattr(c, "captures", {}))


def new_captures(before: frozenset, callables: list | None = None) -> int:
    """Graphs captured since `before` (a `capture_keys()` snapshot). Exact while no callable captures more
    than its cache holds (32 by default) between the two snapshots; never more than the true count."""
    return len(capture_keys(callables) - before)


FACTOR_PATCH = "boxjax.physics.factor_patch"
GRAPH_CAPTURES = "warp/graph_captures"
"""Figure: CUDA graphs MuJoCo Warp captured during an iteration (0 once warm)."""
FUSED_FACTORIZATIONS = "physics/fused_factorizations"
"""Figure: world factorisations our kernel ran during an iteration."""


def fused_factorizations() -> int:
    """World factorisations our kernel (`boxjax.physics.factor_patch`) ran so far in this process; 0, with
    nothing imported, when the patch was never loaded (the CPU path, impl "jax")."""
    patch = sys.modules.get(FACTOR_PATCH)
    return patch.factorizations() if patch is not None else 0


def snapshot() -> tuple[frozenset, int]:
    """What `since` counts from: the graph keys held now and the factorisations run so far."""
    return capture_keys(), fused_factorizations()


def since(before: tuple[frozenset, int]) -> dict[str, float]:
    """{`GRAPH_CAPTURES`, `FUSED_FACTORIZATIONS`}: the graphs captured and the factorisations run since the
    `snapshot` `before`."""
    keys, factored = before
    return {
        GRAPH_CAPTURES: float(new_captures(keys)),
        FUSED_FACTORIZATIONS: float(fused_factorizations() - factored),
    }
