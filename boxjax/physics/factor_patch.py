"""Our one-launch factorisation (`boxjax.physics.factor`) swapped into the MuJoCo Warp that MJX runs.

`install()` replaces MuJoCo Warp's `smooth.factor_solve_i` by `_factor_solve_i` and hooks its `put_model`
(`put_hooks`, shared with the passive-force patch) so every model put on a device registers its schedule
(`register`). Inside a CUDA-graph capture the patch can neither read the model back nor upload tables, so it
finds a model's schedule by a structural fingerprint of MuJoCo Warp's Model; a model it does not know is an
error (`FactorKernelError`), never a silent fall back to MuJoCo Warp's own factorisation: to run that, turn
the kernel off (`install(False)`, `fused_factor=False`).
Each launch also adds its worlds to a counter on the device, so `factorizations()` tells what actually ran.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator

import mujoco
import numpy as np
import warp as wp

from boxjax.physics import factor, put_hooks
from boxjax.physics.factor import Schedule
from boxjax.physics.put_hooks import MJWARP_PACKAGE

_SMOOTH = f"{MJWARP_PACKAGE}._src.smooth"

_SCHEDULES: dict[tuple, Schedule] = {}
_COUNTERS: dict[str, wp.array] = {}
"""Per Warp device: world factorisations our kernel ran there (one int, added to on the device)."""


class FactorKernelError(RuntimeError):
    """Our factorisation was to run on a model it has no schedule for (installed after `put_model`?)."""


@wp.kernel(enable_backward=False)
def _count_worlds(count: wp.array[int], worlds: int):
    wp.atomic_add(count, 0, worlds)


def _counter(device) -> wp.array:
    """The device's factorisation counter (made outside any graph capture, by `register`)."""
    device = wp.get_device(device)
    if device.alias not in _COUNTERS:
        counter = wp.zeros(1, dtype=int, device=device)
        wp.launch(_count_worlds, dim=1, inputs=[counter, 0], device=device)  # loaded before any capture
        _COUNTERS[device.alias] = counter
    return _COUNTERS[device.alias]


def factorizations() -> int:
    """World factorisations our kernel has run in this process so far, over all devices (0 before any;
    waits for the work queued on each device that has a counter)."""
    return sum(int(c.numpy()[0]) for c in _COUNTERS.values())


def needs_fused_factor(mj_model: mujoco.MjModel) -> bool:
    """True when a kinematic tree is larger than MuJoCo Warp's dense-block limit (so M takes sparse LDLᵀ)."""
    return bool(np.any(mj_model.tree_dofnum > _dense_max()))


def register(mj_model: mujoco.MjModel) -> Schedule | None:
    """Builds `mj_model`'s schedule and uploads its tables to every Warp device, for the installed patch.

    The patch runs inside a CUDA-graph capture, where it can neither read the model back nor upload
    tables, so it finds them by a structural fingerprint (nv, nC, MuJoCo Warp's per-level update counts).
    `install()` calls this from `put_model` automatically. Returns None for models the patch leaves alone
    (no tree on the sparse-LDL path); an error for a tree too large for one block's shared memory.
    """
    if not needs_fused_factor(mj_model):
        return None
    schedule = factor.level_schedule(mj_model)
    factor.shared_floats(schedule.nc, schedule.nv, schedule.nslot)  # fits one block, else an error now
    known = _SCHEDULES.get(schedule.fingerprint)
    if known is not None and not _same_tables(known, schedule):
        raise ValueError(
            f"two models share the factor fingerprint {schedule.fingerprint}; cannot tell them apart"
        )
    schedule = known or schedule
    _SCHEDULES[schedule.fingerprint] = schedule
    for device in wp.get_devices():
        factor.device_tables(schedule, device)
        _counter(device)
    return schedule


def _dense_max() -> int:
    """MuJoCo Warp's dense-block limit."""
    return factor._types().M_BLOCK_DENSE_MAX


@contextlib.contextmanager
def all_trees_on_sparse_path(enabled: bool = True) -> Iterator[None]:
    """Within the block (if `enabled`), MuJoCo Warp lays out M with every tree of more than its scalar
    limit (6 dofs) on its sparse-LDL path, the one our kernel takes, by lowering its dense-block limit to
    the scalar one: the block world's 43-DoF opponent rides in our launch instead of its tile Cholesky.
    MuJoCo Warp reads the limit when a model or data is made (`put_model`, `make_data`), never in the step,
    so make both inside. The factorisation is the same LDLᵀ either way; only who computes it changes."""
    types = factor._types()
    limit = types.M_BLOCK_DENSE_MAX
    if enabled:
        types.M_BLOCK_DENSE_MAX = types.M_BLOCK_SCALAR_MAX
    try:
        yield
    finally:
        types.M_BLOCK_DENSE_MAX = limit


def _same_tables(a: Schedule, b: Schedule) -> bool:
    """Whether two schedules have identical tables."""
    return all(np.array_equal(u, v) for u, v in zip(a.arrays(), b.arrays(), strict=True))


def _capture_fingerprint(m, M) -> tuple:
    """The fingerprint as seen from MuJoCo Warp's Model inside the step (shapes only, no device reads): sizes,
    sparse-LDL updates per level, and the block path's packed length and tile sets (size, count)."""
    tiles = tuple((int(t.size), int(t.adr.shape[0])) for t in m.M_tiles)
    return (
        int(m.nv),
        int(M.shape[1]),
        tuple(int(u.shape[0]) for u in m.qLD_updates),
        int(m.qLD_block_total),
        tiles,
    )


_ORIGINAL: dict[str, object] = {}


def _factor_solve_i(m, d, M, L, D, x, y):
    """Drop-in for MuJoCo Warp's `smooth.factor_solve_i`: our kernel on the LDL region, then (mixed models)
    MuJoCo Warp's own block kernels, which redo x of the block-path dofs and write their factors.

    In place (x is y) goes to MuJoCo Warp's own: our kernel writes x of every dof before the block kernels
    read y."""
    if L.shape[1] > m.qLD_block_total and x.ptr != y.ptr:  # a tree on the sparse-LDL path
        fingerprint = _capture_fingerprint(m, M)
        schedule = _SCHEDULES.get(fingerprint)
        tables = None if schedule is None else factor.uploaded_tables(schedule, M.device)
        if tables is None or wp.get_device(M.device).alias not in _COUNTERS:
            raise FactorKernelError(
                f"boxjax fused factor: no registered model with fingerprint {fingerprint} on {M.device} "
                "(call factor_patch.install() before mjx.put_model, or turn the kernel off with "
                "fused_factor=False to run MuJoCo Warp's own factorisation)"
            )
        factor.launch(schedule, tables, M, y, L[:, m.qLD_block_total :], D, x)
        wp.launch(_count_worlds, dim=1, inputs=[_counter(M.device), M.shape[0]], device=M.device)
        if m.M_tiles:
            _ORIGINAL["factor_solve_blocks"](m, d, M, L, D, x, y)
        return
    _ORIGINAL["factor_solve_i"](m, d, M, L, D, x, y)


def _on_put_model(mjm: mujoco.MjModel) -> None:
    """`register`, looked up when a model is put (so a test may stand in for it after `install()`)."""
    register(mjm)


def install(enabled: bool = True) -> None:
    """Swaps our fused factor+solve into the MuJoCo Warp that MJX runs (`install(False)` restores it).

    Patches `smooth.factor_solve_i` of `mujoco.mjx.third_party.mujoco_warp` (MuJoCo Warp's `forward.py`
    calls it through the module attribute, in `fwd_acceleration`, `euler` and `implicit`) and adds `register`
    to the package's `put_model` (`put_hooks`) so every `mjx.put_model(..., impl="warp")` registers its model.

    Order matters: call it before `mjx.put_model` and before the first trace of `mjx.step`. The patched
    Python runs when Warp captures the step's CUDA graph, so a graph captured before the switch keeps the
    old code. This clears the graph caches of `GraphMode.WARP` callables so the next call recaptures;
    staged graph modes cannot be cleared, so there switch in a fresh process.
    """
    smooth = importlib.import_module(_SMOOTH)
    if enabled and not _ORIGINAL:
        _ORIGINAL["factor_solve_blocks"] = smooth._factor_solve_blocks  # mixed models (fails here if renamed)
        _ORIGINAL["factor_solve_i"] = smooth.factor_solve_i
        smooth.factor_solve_i = _factor_solve_i
    elif not enabled and _ORIGINAL:
        smooth.factor_solve_i = _ORIGINAL.pop("factor_solve_i")
        _ORIGINAL.clear()
    if enabled:
        put_hooks.add(__name__, _on_put_model)
    else:
        put_hooks.remove(__name__)
    wp.clear_jax_callable_graph_cache()


def installed() -> bool:
    """Whether `install()` is in effect."""
    return bool(_ORIGINAL)


def stock_factor_solve_i():
    """MuJoCo Warp's own `factor_solve_i`, whether or not the patch is installed (for tests and benches)."""
    return _ORIGINAL.get("factor_solve_i") or importlib.import_module(_SMOOTH).factor_solve_i
