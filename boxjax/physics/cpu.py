"""CPU physics backend: MuJoCo's C engine on `mujoco.batch.Batch` (MuJoCo >= 3.17).

One `Batch` holds every world of a process as one state row each and steps them on its own C++ thread
pool with the GIL released; results are bit-identical at any thread count. The task code reads and
writes live `(num_worlds, ...)` float64 numpy views of the state (`qpos`, `qvel`, `ctrl`, `mocap_pos`,
`mocap_quat`) and reads the derived `sensordata` (and any other derived fields it asks for), which, as
after `mj_step` (and MJX's step), describe the state before the last substep. A world that MuJoCo
rejects (an error, or a bad-acceleration reset inside `mj_step`) is reported as failed, never silently
continued.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
from mujoco import batch as mjbatch

_BADQACC = int(mujoco.mjtWarning.mjWARN_BADQACC)


@dataclasses.dataclass(frozen=True, eq=False)
class Worlds:
    """A batch of worlds and live views of its fields."""

    batch: mjbatch.Batch
    qpos: np.ndarray
    """(num_worlds, nq) float64, writable: the state each world steps from next."""
    qvel: np.ndarray
    """(num_worlds, nv) float64, writable."""
    ctrl: np.ndarray
    """(num_worlds, nu) float64, writable."""
    sensordata: np.ndarray
    """(num_worlds, nsensordata) float64, read-only: refreshed by every step."""
    mocap_pos: np.ndarray
    """(num_worlds, nmocap, 3) float64, writable."""
    mocap_quat: np.ndarray
    """(num_worlds, nmocap, 4) float64, writable."""
    derived: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    """The other derived fields asked for at creation (`make_worlds`' `derived`), by MjData name,
    (num_worlds, ...) float64, read-only: refreshed by every step."""

    @property
    def num_worlds(self) -> int:
        """Worlds in the batch."""
        return self.batch.nsim


def make_worlds(
    model: mujoco.MjModel, num_worlds: int, num_threads: int = 1, derived: tuple[str, ...] = ()
) -> Worlds:
    """`num_worlds` worlds of `model` at its default state, stepped on `num_threads` threads (0: all).

    `derived` names further derived MjData fields to read after each step (e.g. "geom_xpos"); each one
    is copied out of every world at every step, so ask only for what the task reads.
    """
    if num_worlds <= 0:
        raise ValueError(f"num_worlds must be positive, got {num_worlds}")
    batch = mjbatch.Batch(model, num_worlds, nthread=num_threads)
    return Worlds(
        batch=batch,
        qpos=batch.bind("qpos"),
        qvel=batch.bind("qvel"),
        ctrl=batch.bind("ctrl"),
        sensordata=batch.bind("sensordata"),
        mocap_pos=batch.bind("mocap_pos"),
        mocap_quat=batch.bind("mocap_quat"),
        derived={name: batch.bind(name) for name in derived},
    )


def step(worlds: Worlds, substeps: int) -> np.ndarray:
    """`substeps` physics steps of every world (GIL released); returns (num_worlds,) bool: failed worlds.

    A failed world raised a MuJoCo error (it kept its state from before the call) or hit a bad
    acceleration (MuJoCo reset it to the model's default state): either way its step is not physics.
    """
    badqacc = worlds.batch.warning[:, _BADQACC, 0].copy()
    failed = np.zeros(worlds.num_worlds, bool)
    try:
        worlds.batch.step(nstep=substeps)
    except mjbatch.SimulationError as err:
        failed[err.ids] = True
    failed |= worlds.batch.warning[:, _BADQACC, 0] != badqacc
    return failed


def reset(worlds: Worlds, ids: np.ndarray) -> None:
    """Put worlds `ids` (sorted int array) back to the model's default state; the caller writes the pose.

    Velocities, controls and the solver warm start are zeroed, mocap bodies put back where the model
    has them; nothing is computed until the next step.
    """
    worlds.batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE)


def is_finite(worlds: Worlds) -> np.ndarray:
    """(num_worlds,) bool: the world's state holds no NaN or inf."""
    return np.isfinite(worlds.qpos).all(axis=1) & np.isfinite(worlds.qvel).all(axis=1)
