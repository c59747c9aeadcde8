"""Contact budgets: the most contacts and constraint rows one world needs, measured on the CPU.

MJX-Warp sizes its contact pool (`naconmax`, all worlds) and constraint rows (`njmax`, per world)
up front, so the physics backend reads these constants. Re-measure with `python -m boxjax.mjcf.budget`.

How the numbers were measured (`mujoco.mj_step`, dt = 5 ms, max over every step):
  stance: the `stance` keyframe held for 2 s;
  lying:  from `stand` tilted 0.6 rad forward, backward or sideways, ctrl 0 (stiff) and a limp copy
          (gains x0.02), 3 s each, so the body lies on the floor;
  clinch: both fighters in `stance` 0.45 m apart, pelvises pushed together with 300 N for 2 s.
The single-fighter budget is 1.5 x max(stance, lying); the two-fighter budget is
1.5 x max(clinch, 2 x lying), both rounded up to a multiple of 8.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from boxjax.mjcf import arena


@dataclasses.dataclass(frozen=True)
class ContactBudget:
    """Buffer sizes for one world."""

    ncon_per_world: int
    """Contacts one world may hold (naconmax = this x number of worlds)."""
    njmax: int
    """Constraint rows (nefc) one world may hold."""


# Measured peaks (ncon, nefc) per scenario, from `python -m boxjax.mjcf.budget`.
MEASURED = {
    "muscular": {"stance": (16, 64), "lying": (19, 97), "clinch": (34, 136)},
    "muscular-fast": {"stance": (12, 48), "lying": (21, 88), "clinch": (26, 104)},
    "simple": {"stance": (12, 48), "lying": (17, 70), "clinch": (26, 104)},
}


def _with_margin(ncon: int, nefc: int) -> ContactBudget:
    up8 = lambda x: int(-(-int(np.ceil(1.5 * x)) // 8) * 8)  # noqa: E731
    return ContactBudget(ncon_per_world=up8(ncon), njmax=up8(nefc))


def _single(m: dict) -> ContactBudget:
    return _with_margin(*np.maximum(m["stance"], m["lying"]))


def _pair(m: dict) -> ContactBudget:
    return _with_margin(*np.maximum(m["clinch"], 2 * np.asarray(m["lying"])))


CONTACT_BUDGET = {body: _single(m) for body, m in MEASURED.items()}
"""Budget of a world with one fighter (plus bag), by body."""

PAIR_BUDGET = {body: _pair(m) for body, m in MEASURED.items()}
"""Budget of a world with two fighters (plus bag), by body."""


def budget(body: str, opponent: bool) -> ContactBudget:
    """The contact budget of one world: `CONTACT_BUDGET` alone, `PAIR_BUDGET` with an opponent."""
    table = PAIR_BUDGET if opponent else CONTACT_BUDGET
    if body not in table:
        raise ValueError(f"unknown body {body!r}; choose one of {', '.join(table)}")
    return table[body]


def _peak(model: mujoco.MjModel, data: mujoco.MjData, seconds: float, push=None) -> tuple[int, int]:
    ncon = nefc = 0
    for _ in range(int(round(seconds / model.opt.timestep))):
        if push is not None:
            push(data)
        mujoco.mj_step(model, data)
        ncon, nefc = max(ncon, data.ncon), max(nefc, data.nefc)
    return ncon, nefc


def stance_peak(body: str, seconds: float = 2.0) -> tuple[int, int]:
    """Peak (ncon, nefc) of one fighter holding `stance`."""
    model, index = arena.build(body)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, index.keyframes["stance"])
    return _peak(model, data, seconds)


def lying_peak(body: str, seconds: float = 3.0, limp: bool = True) -> tuple[int, int]:
    """Peak (ncon, nefc) of one fighter falling from `stand` in three directions, ctrl 0."""
    model, index = arena.build(body)
    if limp:
        model.actuator_gainprm[:, 0] *= 0.02
        model.actuator_biasprm[:, 1:3] *= 0.02
    data = mujoco.MjData(model)
    peak = np.zeros(2, int)
    for axis in ([0, 1, 0], [0, -1, 0], [1, 0, 0]):
        mujoco.mj_resetDataKeyframe(model, data, index.keyframes["stand"])
        tilt = np.zeros(4)
        mujoco.mju_axisAngle2Quat(tilt, np.asarray(axis, float), 0.6)
        mujoco.mju_mulQuat(data.qpos[3:7], tilt, data.qpos[3:7].copy())
        data.ctrl[:] = 0.0
        peak = np.maximum(peak, _peak(model, data, seconds))
    return int(peak[0]), int(peak[1])


def clinch_peak(body: str, seconds: float = 2.0, force: float = 300.0) -> tuple[int, int]:
    """Peak (ncon, nefc) of two fighters in `stance` pushed into each other."""
    model, index = arena.build(body, opponent=True)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, index.keyframes["stance"])
    data.qpos[index.blue.qpos_adr] -= arena.OPPONENT_DISTANCE - 0.45
    red, blue = index.red.pelvis_body, index.blue.pelvis_body

    def push(d):
        d.xfrc_applied[red, 0], d.xfrc_applied[blue, 0] = force, -force

    return _peak(model, data, seconds, push)


def measure(body: str) -> dict[str, tuple[int, int]]:
    """Runs every scenario for one body; the result has the shape of `MEASURED[body]`."""
    lying = np.maximum(lying_peak(body, limp=False), lying_peak(body, limp=True))
    return {"stance": stance_peak(body), "lying": tuple(int(x) for x in lying), "clinch": clinch_peak(body)}


def main() -> None:
    """Re-measures every body and prints the peaks and the budgets they imply."""
    for body in MEASURED:
        m = measure(body)
        print(f"{body}: {m}  single {_single(m)}  pair {_pair(m)}")


if __name__ == "__main__":
    main()
