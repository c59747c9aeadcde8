"""CPU physics backend: MuJoCo's C engine on `mujoco.batch.Batch` (MuJoCo >= 3.17).

One `Batch` holds every world of a process as one state row each and steps them on its own C++ thread
pool with the GIL released; results are bit-identical at any thread count. The task code reads and
writes live `(num_worlds, ...)` float64 numpy views of the state (`qpos`, `qvel`, `ctrl`, `mocap_pos`,
`mocap_quat`) and reads the derived `sensordata` (and any other derived fields it asks for), which, as
after `mj_step` (and MJX's step), describe the state before the last substep. A world that MuJoCo
rejects (an error, or a bad-acceleration reset inside `mj_step`) is reported as failed, never silently
continued.

A world whose contacts or constraint rows did not fit MuJoCo's arena (`<size memory>`: MuJoCo then drops
them, warning `mjWARN_CONTACTFULL` / `mjWARN_CNSTRFULL`, and the step goes on without them) is reported
as overflowed (`StepOutcome.overflow`), never silently continued.

`CBackend` is this engine as a task's backend (`boxjax.physics.backend`): its one-world data is a
`PhysicsView` (float32 copies of the fields a task reads), which `boxjax.envs.cpu.CpuEnv` fills from the
worlds after each step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct
from mujoco import batch as mjbatch

from boxjax.physics import backend

_BADQACC = int(mujoco.mjtWarning.mjWARN_BADQACC)
OVERFLOW_WARNINGS = {
    "contact_arena": int(mujoco.mjtWarning.mjWARN_CONTACTFULL),
    "constraint_arena": int(mujoco.mjtWarning.mjWARN_CNSTRFULL),
}
"""The C engine's overflow kinds: the MuJoCo warning counted for each (contacts or constraint rows that
did not fit the arena and were dropped)."""
OVERFLOW_BITS = {name: 1 << i for i, name in enumerate(OVERFLOW_WARNINGS)}
"""The bit of each overflow kind in `StepOutcome.overflow`'s words."""
FIGURE_NAMES = tuple(f"overflow/{k}" for k in OVERFLOW_WARNINGS)
"""The names of `CBackend.figures`' entries."""


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


@dataclasses.dataclass(frozen=True)
class StepOutcome:
    """What `step` reports per world."""

    failed: np.ndarray
    """(num_worlds,) bool: the step is not physics (a MuJoCo error: the world kept its state from before
    the call; or a bad acceleration: MuJoCo reset it to the model's default state)."""
    overflow: np.ndarray
    """(num_worlds,) int32 word of `OVERFLOW_BITS`: the kinds that overflowed during the step."""


def step(worlds: Worlds, substeps: int) -> StepOutcome:
    """`substeps` physics steps of every world (GIL released); which worlds failed or overflowed."""
    warnings = worlds.batch.warning
    badqacc = warnings[:, _BADQACC, 0].copy()
    counts = {name: warnings[:, w, 0].copy() for name, w in OVERFLOW_WARNINGS.items()}
    failed = np.zeros(worlds.num_worlds, bool)
    try:
        worlds.batch.step(nstep=substeps)
    except mjbatch.SimulationError as err:
        failed[err.ids] = True
    failed |= warnings[:, _BADQACC, 0] != badqacc
    overflow = np.zeros(worlds.num_worlds, np.int32)
    for name, w in OVERFLOW_WARNINGS.items():
        overflow |= np.where(warnings[:, w, 0] != counts[name], OVERFLOW_BITS[name], 0).astype(np.int32)
    return StepOutcome(failed=failed, overflow=overflow)


def reset(worlds: Worlds, ids: np.ndarray) -> None:
    """Put worlds `ids` (sorted int array) back to the model's default state; the caller writes the pose.

    Velocities, controls and the solver warm start are zeroed, mocap bodies put back where the model
    has them; nothing is computed until the next step.
    """
    worlds.batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE)


@struct.dataclass
class PhysicsView:
    """The physics fields a task reads, float32 (`mjx.Data`'s names, shapes and frames): one world's, or
    K worlds' with a leading axis. Derived fields describe the state before the last substep, as after
    `mjx.step`; those the task does not read (not in `CBackend.derived`) are None."""

    qpos: jax.Array
    """(nq,) joint positions."""
    qvel: jax.Array
    """(nv,) joint velocities."""
    ctrl: jax.Array
    """(nu,) actuator controls."""
    mocap_pos: jax.Array
    """(nmocap, 3) mocap bodies."""
    mocap_quat: jax.Array
    """(nmocap, 4)."""
    sensordata: jax.Array
    """(nsensordata,) sensors."""
    overflow: jax.Array
    """() int32 word of `OVERFLOW_BITS`: what overflowed in the last step."""
    xpos: jax.Array | None = None
    """(nbody, 3) body positions."""
    xmat: jax.Array | None = None
    """(nbody, 3, 3) body orientations."""
    geom_xpos: jax.Array | None = None
    """(ngeom, 3) geom positions."""
    geom_xmat: jax.Array | None = None
    """(ngeom, 3, 3) geom orientations."""
    site_xpos: jax.Array | None = None
    """(nsite, 3) site positions."""
    site_xmat: jax.Array | None = None
    """(nsite, 3, 3) site orientations."""


STATE_FIELDS = ("qpos", "qvel", "ctrl", "mocap_pos", "mocap_quat", "sensordata")
"""The state and sensor fields every `PhysicsView` holds."""
DERIVED = ("xpos", "xmat", "geom_xpos", "geom_xmat", "site_xpos", "site_xmat")
"""The derived fields a task may ask for (`CBackend.derived`)."""


def _float32(arrays: dict[str, Any], lead: tuple[int, ...], xp: Any) -> dict[str, Any]:
    """`arrays` as float32 arrays of `xp` (jnp or np), the orientations as 3 x 3 matrices (MuJoCo's C
    engine keeps them as rows of 9); `lead` is the world axes' shape (() for one world)."""
    out = {name: xp.asarray(value, xp.float32) for name, value in arrays.items()}
    return {k: v.reshape(*lead, -1, 3, 3) if k.endswith("xmat") else v for k, v in out.items()}


def view_of(data: Any, derived: tuple[str, ...] = DERIVED) -> PhysicsView:
    """The `PhysicsView` of an `mjx.Data` or `MjData` (one world or K), float32, with `derived` and nothing
    overflowed (a template, or C worlds started from a JAX env's state)."""
    lead = np.shape(data.qpos)[:-1]
    fields = _float32({k: getattr(data, k) for k in (*STATE_FIELDS, *derived)}, lead, jnp)
    return PhysicsView(overflow=jnp.zeros(lead, jnp.int32), **fields)


def view(worlds: Worlds, outcome: StepOutcome) -> PhysicsView:
    """The worlds' fields after a step, float32 numpy (K, ...); a failed world's qpos is NaN, so a task's
    NaN guard ends its episode."""
    arrays = {**{k: getattr(worlds, k) for k in STATE_FIELDS}, **worlds.derived}
    fields = _float32(arrays, (worlds.num_worlds,), np)
    fields["qpos"][outcome.failed] = np.nan
    return PhysicsView(overflow=outcome.overflow, **fields)


@dataclasses.dataclass(frozen=True)
class CBackend:
    """MuJoCo's C engine as a task's physics backend (`boxjax.physics.backend.Backend`). The model lives
    in the worlds (`make_worlds`), not in the params; the worlds step outside any trace, between a task's
    `before_physics` and `after_physics` (`boxjax.envs.cpu.CpuEnv`)."""

    derived: tuple[str, ...] = ()
    """The derived fields (of `DERIVED`) the task reads besides the state and sensors."""
    impl: str = "mujoco-c"
    substeps_in_one_call: bool = False

    def __post_init__(self) -> None:
        """Reject derived fields the worlds cannot read."""
        unknown = set(self.derived) - set(DERIVED)
        if unknown:
            raise ValueError(f"derived fields {sorted(unknown)} are not readable; valid: {DERIVED}")

    @property
    def figure_names(self) -> tuple[str, ...]:
        """`FIGURE_NAMES`."""
        return FIGURE_NAMES

    def put_model(self, mj_model: mujoco.MjModel) -> None:
        """None: the worlds hold the model."""
        return None

    def make_data(self, mj_model: mujoco.MjModel) -> PhysicsView:
        """The `PhysicsView` of the model's default state (derived fields zero until a step)."""
        return view_of(mujoco.MjData(mj_model), self.derived)

    def step(self, model: None, data: PhysicsView, substeps: int) -> PhysicsView:
        """Refused: the C engine cannot step inside a JAX trace."""
        raise TypeError(
            "MuJoCo's C engine steps outside a JAX trace: run the task through boxjax.envs.cpu.CpuEnv, "
            "which steps the worlds between the task's before_physics and after_physics"
        )

    def figures(self, data: PhysicsView) -> dict[str, jax.Array]:
        """() float32 per kind: 1.0 if this world's contacts or constraint rows overflowed the arena."""
        word = jnp.asarray(data.overflow, jnp.int32)
        return {f"overflow/{k}": ((word & bit) != 0).astype(jnp.float32) for k, bit in OVERFLOW_BITS.items()}

    def is_finite(self, data: PhysicsView) -> jax.Array:
        """`boxjax.physics.backend.is_finite`."""
        return backend.is_finite(data)

    def host_snapshot(self) -> None:
        """None: the C engine keeps no host-side counts."""
        return None

    def host_figures(self, before: None) -> dict[str, float]:
        """Empty: the C engine keeps no host-side counts."""
        return {}
