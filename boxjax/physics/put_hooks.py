"""The one wrapper of MuJoCo Warp's `put_model` that boxjax's patches share.

Our factorisation (`factor_patch`) and the passive-force patch (`passive_patch`) each need every model put
on a device to be registered first. Were each to wrap `put_model` itself, it would keep whatever the other had
left there as the original: installed in one order after the other, each wrapper would call the other without
end. So `put_model` is wrapped once, here, around the function MuJoCo Warp's package held before; each patch
adds its registration under its name (`add`) and takes it out (`remove`); the last one out restores the
package's own function.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import mujoco

MJWARP_PACKAGE = "mujoco.mjx.third_party.mujoco_warp"
"""The MuJoCo Warp that MJX runs (its vendored copy)."""

_HOOKS: dict[str, Callable[[mujoco.MjModel], object]] = {}
"""Per patch: what it runs on a model before MuJoCo Warp puts it on a device (in the order added)."""
_WRAPPED: dict[str, Callable] = {}
"""Under "put_model": the package's function that `_put_model` calls, while `_put_model` stands in for it."""


def _put_model(mjm, *args, **kwargs):
    """MuJoCo Warp's `put_model`, every patch's registration run on the model first."""
    for hook in tuple(_HOOKS.values()):
        hook(mjm)
    return _WRAPPED["put_model"](mjm, *args, **kwargs)


def add(name: str, hook: Callable[[mujoco.MjModel], object]) -> None:
    """Runs `hook(mj_model)` before every `put_model` of MuJoCo Warp's package from now on (again under
    `name`: replaced, not added twice). Wraps the package's function unless it is already this module's,
    so the wrapper never wraps itself, whichever patch comes first."""
    package = importlib.import_module(MJWARP_PACKAGE)
    if package.put_model is not _put_model:
        _WRAPPED["put_model"] = package.put_model
        package.put_model = _put_model
    _HOOKS[name] = hook


def remove(name: str) -> None:
    """Stops running the hook added under `name` (none: nothing to do); with none left, restores the
    package's `put_model` as `add` found it."""
    _HOOKS.pop(name, None)
    package = importlib.import_module(MJWARP_PACKAGE)
    if not _HOOKS and "put_model" in _WRAPPED:
        if package.put_model is _put_model:
            package.put_model = _WRAPPED["put_model"]
        del _WRAPPED["put_model"]


def hooks() -> tuple[str, ...]:
    """Names of the hooks that run now, in order."""
    return tuple(_HOOKS)
