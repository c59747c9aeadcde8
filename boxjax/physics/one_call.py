"""Every physics substep of a control step in one MuJoCo Warp call, not one call per substep.

MJX runs MuJoCo Warp's step as one XLA FFI call per physics step, and each call costs host time (Python
handling a few hundred buffer addresses, then a CUDA graph launch). `step` makes one FFI call whose Warp
function runs MuJoCo Warp's step `substeps` times in a row: Warp captures one CUDA graph of all of them. The
data stays in Warp's buffers between substeps, exactly as MJX hands it from one call to the next, so the
result is the same as `substeps` calls (tested against them). In MJX's default graph mode it did not pay
(docs/history.md), so `PhysicsConfig.substeps_in_one_call` is off by default.

It reuses MJX's own marshalling (`mujoco.mjx.warp.forward`): a copy of MJX's step shim whose global
`mjwarp` is a stand-in that steps `substeps` times, and a copy of MJX's JAX-side step that calls it.
"""

from __future__ import annotations

import functools
import importlib
import types
from collections.abc import Callable

_FORWARD = "mujoco.mjx.warp.forward"
"""MJX's MuJoCo Warp step (`_step_shim`, `_step_jax_impl`)."""


def step(model, data, substeps: int):
    """`substeps` MuJoCo Warp physics steps of one world (vmap it for many) in one FFI call."""
    return _stepper(substeps)(model, data)


class _RepeatedStep:
    """Stands in for the MuJoCo Warp package inside the copied shim: its `step` runs `substeps` steps."""

    def __init__(self, package: types.ModuleType, substeps: int):
        self._package = package
        self._substeps = substeps

    def step(self, m, d) -> None:
        """MuJoCo Warp's step, `substeps` times on the same model and data."""
        for _ in range(self._substeps):
            self._package.step(m, d)

    def __getattr__(self, name: str):
        return getattr(self._package, name)


@functools.cache
def _stepper(substeps: int) -> Callable:
    """MJX's vmappable Warp step with its shim running `substeps` steps (one FFI target per count)."""
    if substeps < 1:
        raise ValueError(f"substeps must be positive, got {substeps}")
    import jax

    forward = importlib.import_module(_FORWARD)
    ffi = forward.ffi
    shim = forward._step_shim.__wrapped__  # under MJX's `format_args_for_warp`
    repeated_shim = _copy_function(
        shim, {"mjwarp": _RepeatedStep(forward.mjwarp, substeps)}, f"{shim.__name__}_x{substeps}"
    )
    jax_step = _copy_function(
        forward._step_jax_impl, {"_step_shim": ffi.format_args_for_warp(repeated_shim)}, f"step_x{substeps}"
    )

    @jax.custom_batching.custom_vmap
    @ffi.marshal_jax_warp_callable
    def stepper(m, d):
        return jax_step(m, d)

    @stepper.def_vmap
    @ffi.marshal_custom_vmap
    def _stepper_vmap(unused_axis_size, is_batched, m, d):
        return stepper(m, d), is_batched[1]

    return stepper


def _copy_function(func: types.FunctionType, replaced_globals: dict, name: str) -> types.FunctionType:
    """`func` with some of its module's globals replaced (its module is left untouched)."""
    if func.__closure__:
        raise TypeError(f"{func.__qualname__} has a closure; MJX's step changed shape")
    copy = types.FunctionType(
        func.__code__, {**func.__globals__, **replaced_globals}, name, func.__defaults__
    )
    copy.__annotations__ = dict(func.__annotations__)
    copy.__kwdefaults__ = func.__kwdefaults__
    copy.__qualname__ = name
    return copy
