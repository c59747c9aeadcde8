"""MuJoCo Warp's passive forces without its gravity-compensation launch for models that have no gravity
compensation.

The MuJoCo Warp that MJX 3.17 vendors launches its `_gravity_force` kernel over worlds × bodies × dofs in
every step whether or not any body has `gravcomp` (MuJoCo C checks `ngravcomp` first); each thread reads a
zero and returns. For the two-fighter block world that is 140 µs of device time a physics step on an H100
(11 ms of the 0.37 s iteration; `docs/history.md`). `install()` wraps MuJoCo Warp's `passive.passive`: for a
model registered without gravity compensation it passes a model whose options disable gravity. In `passive`
and what it calls that flag decides only that launch and whether the sum of passive forces adds
`qfrc_gravcomp`, which is zeroed either way, so the forces are the same (a passive callback would see the
flag; boxjax models have none). Inside a CUDA-graph capture the model cannot be read back, so it is
recognised by its sizes (`_fingerprint`); `install()` also hooks MuJoCo Warp's `put_model` (`put_hooks`,
shared with our factorisation's patch) so that every model put on a device is registered (a model of a
registered one's sizes but other gravity compensation is an error), and a model not registered keeps MuJoCo
Warp's own `passive`. Changing `body_gravcomp` after `put_model` is not seen: rebuild the model.
"""

from __future__ import annotations

import dataclasses
import importlib

import mujoco

from boxjax.physics import put_hooks
from boxjax.physics.put_hooks import MJWARP_PACKAGE

_PASSIVE = f"{MJWARP_PACKAGE}._src.passive"
_TYPES = f"{MJWARP_PACKAGE}._src.types"
_SIZES = ("nbody", "njnt", "nv", "nu", "ngeom", "nsite")
"""The sizes a model is recognised by."""

_WITHOUT_GRAVCOMP: dict[tuple, bool] = {}
"""Per fingerprint of a registered model: True where no body has gravity compensation."""
_ORIGINAL: dict[str, object] = {}


class FingerprintClashError(ValueError):
    """Two registered models share their sizes but not their gravity compensation."""


def _fingerprint(model) -> tuple[int, ...]:
    """The sizes `_SIZES` of a MuJoCo or MuJoCo Warp model."""
    return tuple(int(getattr(model, name)) for name in _SIZES)


def register(mj_model: mujoco.MjModel) -> None:
    """Notes whether `mj_model` has gravity compensation, for the installed patch (before `put_model`).

    Raises:
      FingerprintClashError: another registered model has the same sizes but the other answer.
    """
    fingerprint = _fingerprint(mj_model)
    without = bool(mj_model.ngravcomp == 0)
    if _WITHOUT_GRAVCOMP.setdefault(fingerprint, without) != without:
        raise FingerprintClashError(
            f"two models with sizes {dict(zip(_SIZES, fingerprint, strict=True))} differ in gravity "
            "compensation; the passive-force patch cannot tell them apart"
        )


def _passive(m, d):
    """MuJoCo Warp's `passive.passive`, gravity compensation's launch left out for a model registered
    without it."""
    if _WITHOUT_GRAVCOMP.get(_fingerprint(m), False):
        gravity = importlib.import_module(_TYPES).DisableBit.GRAVITY
        m = dataclasses.replace(m, opt=dataclasses.replace(m.opt, disableflags=m.opt.disableflags | gravity))
    _ORIGINAL["passive"](m, d)


def _on_put_model(mjm: mujoco.MjModel) -> None:
    """`register`, looked up when a model is put (so a test may stand in for it after `install()`)."""
    register(mjm)


def install(enabled: bool = True) -> None:
    """Wraps MuJoCo Warp's `passive.passive` (its `forward.py` calls it through the module attribute) and adds
    `register` to its package's `put_model` (MJX calls that one; `put_hooks`); `install(False)` restores
    both. Either may come before or after `factor_patch.install`, any number of times. As with
    `factor_patch.install`, call it before the step's first CUDA-graph capture: a graph captured before
    keeps the code it captured."""
    passive = importlib.import_module(_PASSIVE)
    if enabled:
        if "passive" not in _ORIGINAL:
            _ORIGINAL["passive"] = passive.passive
            passive.passive = _passive
        put_hooks.add(__name__, _on_put_model)
    else:
        if "passive" in _ORIGINAL:
            passive.passive = _ORIGINAL.pop("passive")
        put_hooks.remove(__name__)


def installed() -> bool:
    """Whether `install()` is in effect."""
    return bool(_ORIGINAL)
