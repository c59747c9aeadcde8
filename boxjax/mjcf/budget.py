"""Contact budgets: the most contacts and constraint rows one world needs, measured on the CPU.

MJX-Warp sizes its contact pool (`naconmax`, all worlds) and constraint rows (`njmax`, per world)
up front, so the physics backend reads these constants. Re-measure with `python -m boxjax.mjcf.budget`.

How the numbers were measured (`mujoco.mj_step`, dt = 5 ms, max over every step):
  stance:    the `stance` keyframe held for 2 s;
  lying:     from `stand` tilted 0.6 rad forward, backward or sideways, ctrl 0 (stiff) and a limp copy
             (gains x0.02), 3 s each, so the body lies on the floor;
  clinch:    both fighters in `stance` 0.45 m apart, pelvises pushed together with 300 N for 2 s;
  both_down: both fighters from `stand` 0.6 m apart tilted 0.6 rad toward each other (and both to the
             same side), stiff and limp, 3 s each, so they fall onto each other and lie tangled;
  on_top:    the opponent falling backward from `stand`, ours 0.5 m away falling forward onto him, stiff
             and limp, 3 s each.
Pairs are measured with both fighters free on the floor (the block arena's opponent, welded and off the
floor, touches less). The single-fighter budget is 1.5 x max(stance, lying); the two-fighter budget is
1.5 x max(clinch, both_down, on_top, lying of one + lying of the other), both rounded up to a multiple of 8;
the block arena adds its weld's rows (`world_budget`).
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
    "muscular": {"stance": (16, 64), "lying": (19, 97)},
    "muscular-fast": {"stance": (12, 48), "lying": (21, 88)},
    "simple": {"stance": (12, 48), "lying": (17, 70)},
}
"""One fighter's peaks, by body."""
MEASURED_PAIRS = {
    ("muscular", "muscular"): {"clinch": (34, 136), "both_down": (41, 194), "on_top": (39, 185)},
    ("muscular", "muscular-fast"): {"clinch": (30, 120), "both_down": (32, 176), "on_top": (38, 189)},
    ("muscular", "simple"): {"clinch": (30, 120), "both_down": (32, 143), "on_top": (33, 153)},
    ("muscular-fast", "muscular"): {"clinch": (30, 120), "both_down": (32, 174), "on_top": (33, 167)},
    ("muscular-fast", "muscular-fast"): {"clinch": (26, 104), "both_down": (34, 176), "on_top": (34, 176)},
    ("muscular-fast", "simple"): {"clinch": (26, 104), "both_down": (34, 159), "on_top": (33, 150)},
    ("simple", "muscular"): {"clinch": (30, 120), "both_down": (32, 152), "on_top": (34, 150)},
    ("simple", "muscular-fast"): {"clinch": (26, 104), "both_down": (34, 159), "on_top": (30, 140)},
    ("simple", "simple"): {"clinch": (26, 104), "both_down": (34, 140), "on_top": (31, 128)},
}
"""Two fighters' peaks, by (our body, the opponent's body)."""
WELD_ROWS = 6
"""Constraint rows of the weld holding the block arena's simulated opponent (`boxjax.mjcf.sparring`)."""


def _with_margin(ncon: int, nefc: int) -> ContactBudget:
    up8 = lambda x: int(-(-int(np.ceil(1.5 * x)) // 8) * 8)  # noqa: E731
    return ContactBudget(ncon_per_world=up8(ncon), njmax=up8(nefc))


def _single(m: dict) -> ContactBudget:
    return _with_margin(*np.maximum(m["stance"], m["lying"]))


def _pair(pair: dict, lying_a, lying_b) -> ContactBudget:
    peaks = [pair["clinch"], pair["both_down"], pair["on_top"], np.add(lying_a, lying_b)]
    return _with_margin(*np.max(np.asarray(peaks), axis=0))


def _check_body(body: str) -> None:
    if body not in MEASURED:
        raise ValueError(f"unknown body {body!r}; choose one of {', '.join(MEASURED)}")


CONTACT_BUDGET = {body: _single(m) for body, m in MEASURED.items()}
"""Budget of a world with one fighter (plus bag), by body."""


def pair_budget(body: str, opponent_body: str) -> ContactBudget:
    """The budget of two free fighters (ours `body`, the opponent `opponent_body`) and the bag."""
    _check_body(body)
    _check_body(opponent_body)
    pair = MEASURED_PAIRS[(body, opponent_body)]
    return _pair(pair, MEASURED[body]["lying"], MEASURED[opponent_body]["lying"])


PAIR_BUDGET = {body: pair_budget(body, body) for body in MEASURED}
"""Budget of a world with two fighters of one body (plus bag), by body."""


def budget(body: str, opponent: bool) -> ContactBudget:
    """The contact budget of one world: `CONTACT_BUDGET` alone, `PAIR_BUDGET` with an opponent."""
    _check_body(body)
    return (PAIR_BUDGET if opponent else CONTACT_BUDGET)[body]


def world_budget(body: str, opponent_body: str | None) -> ContactBudget:
    """The block arena's budget: with a simulated opponent of `opponent_body`, the pair's and his weld's
    rows; with the puppet (`opponent_body` None), `PAIR_BUDGET[body]` (his geoms are our body's)."""
    if opponent_body is None:
        return budget(body, opponent=True)
    pair = pair_budget(body, opponent_body)
    return ContactBudget(ncon_per_world=pair.ncon_per_world, njmax=pair.njmax + WELD_ROWS)


def _peak(model: mujoco.MjModel, data: mujoco.MjData, seconds: float, push=None) -> tuple[int, int]:
    ncon = nefc = 0
    for _ in range(int(round(seconds / model.opt.timestep))):
        if push is not None:
            push(data)
        mujoco.mj_step(model, data)
        ncon, nefc = max(ncon, data.ncon), max(nefc, data.nefc)
    return ncon, nefc


def _limp(model: mujoco.MjModel) -> None:
    """Scales every actuator's gains to 2 % (in place): the bodies fall slack."""
    model.actuator_gainprm[:, 0] *= 0.02
    model.actuator_biasprm[:, 1:3] *= 0.02


def _tilt(qpos: np.ndarray, axis, angle_rad: float) -> None:
    """Turns a free joint's orientation `qpos` (7,) by `angle_rad` about the world `axis`, in place."""
    tilt = np.zeros(4)
    mujoco.mju_axisAngle2Quat(tilt, np.asarray(axis, float), angle_rad)
    mujoco.mju_mulQuat(qpos[3:7], tilt, qpos[3:7].copy())


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
        _limp(model)
    data = mujoco.MjData(model)
    peak = np.zeros(2, int)
    for axis in ([0, 1, 0], [0, -1, 0], [1, 0, 0]):
        mujoco.mj_resetDataKeyframe(model, data, index.keyframes["stand"])
        _tilt(data.qpos[0:7], axis, 0.6)
        data.ctrl[:] = 0.0
        peak = np.maximum(peak, _peak(model, data, seconds))
    return int(peak[0]), int(peak[1])


def clinch_peak(body: str, opponent_body: str, seconds: float = 2.0, force: float = 300.0) -> tuple[int, int]:
    """Peak (ncon, nefc) of two fighters in `stance` pushed into each other."""
    model, index = arena.build(body, opponent=True, opponent_body=opponent_body)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, index.keyframes["stance"])
    data.qpos[index.blue.qpos_adr] -= arena.OPPONENT_DISTANCE - 0.45
    red, blue = index.red.pelvis_body, index.blue.pelvis_body

    def push(d):
        d.xfrc_applied[red, 0], d.xfrc_applied[blue, 0] = force, -force

    return _peak(model, data, seconds, push)


def _pair_falls(body: str, opponent_body: str, falls, distance_m: float, seconds: float) -> tuple[int, int]:
    """Peak (ncon, nefc) over `falls`, each ((our tilt axis), (his tilt axis)) from `stand` `distance_m`
    apart, 0.6 rad each, stiff (ctrl 0) and limp."""
    peak = np.zeros(2, int)
    for limp in (False, True):
        model, index = arena.build(body, opponent=True, opponent_body=opponent_body)
        if limp:
            _limp(model)
        data = mujoco.MjData(model)
        red, blue = index.red.qpos_adr, index.blue.qpos_adr
        for ours, his in falls:
            mujoco.mj_resetDataKeyframe(model, data, index.keyframes["stand"])
            data.qpos[blue] -= arena.OPPONENT_DISTANCE - distance_m
            _tilt(data.qpos[red : red + 7], ours, 0.6)
            _tilt(data.qpos[blue : blue + 7], his, 0.6)
            data.ctrl[:] = 0.0
            peak = np.maximum(peak, _peak(model, data, seconds))
    return int(peak[0]), int(peak[1])


def both_down_peak(body: str, opponent_body: str, seconds: float = 3.0) -> tuple[int, int]:
    """Peak (ncon, nefc) of both fighters falling onto each other, or side by side to one side."""
    toward = (([0, 1, 0], [0, -1, 0]), ([1, 0, 0], [1, 0, 0]))  # he faces -x: tilting forward is -y about
    return _pair_falls(body, opponent_body, toward, 0.6, seconds)


def on_top_peak(body: str, opponent_body: str, seconds: float = 3.0) -> tuple[int, int]:
    """Peak (ncon, nefc) of ours falling forward onto the opponent, who falls backward away from him."""
    return _pair_falls(body, opponent_body, (([0, 1, 0], [0, 1, 0]),), 0.5, seconds)


def measure(body: str) -> dict[str, tuple[int, int]]:
    """One fighter's scenarios; the result has the shape of `MEASURED[body]`."""
    lying = np.maximum(lying_peak(body, limp=False), lying_peak(body, limp=True))
    return {"stance": stance_peak(body), "lying": tuple(int(x) for x in lying)}


def measure_pair(body: str, opponent_body: str) -> dict[str, tuple[int, int]]:
    """Two fighters' scenarios; the result has the shape of `MEASURED_PAIRS[(body, opponent_body)]`."""
    return {
        "clinch": clinch_peak(body, opponent_body),
        "both_down": both_down_peak(body, opponent_body),
        "on_top": on_top_peak(body, opponent_body),
    }


def main() -> None:
    """Re-measures every body and pair and prints the peaks and the budgets they imply."""
    for body in MEASURED:
        m = measure(body)
        print(f"{body}: {m}  single {_single(m)}")
    for body in MEASURED:
        for rival in MEASURED:
            pair = measure_pair(body, rival)
            slots = _pair(pair, MEASURED[body]["lying"], MEASURED[rival]["lying"])
            print(f"{(body, rival)}: {pair}  pair {slots}")


if __name__ == "__main__":
    main()
