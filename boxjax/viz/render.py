"""Traced episodes drawn offscreen with MuJoCo's own renderer (`mujoco.Renderer`), a camera that follows
the fighters, and the block task's overlays (`boxjax.viz.overlays`).

A frame is posed from what `boxjax.viz.record` kept of the step (qpos, and the mocap bodies where the model
has them), so any task's trace renders; the overlays need `record.block_record`'s fields and the arena's
`overlays.BlockMarks`. MuJoCo binds its OpenGL backend on import: choose it first
(`boxjax.platform.select_gl`).
"""

from __future__ import annotations

import copy
import dataclasses

import mujoco
import numpy as np

from boxjax.mjcf import arena
from boxjax.viz import overlays
from boxjax.viz.record import PUNCH_FLAGS

OURS = arena.RED + "pelvis"
THEIRS = arena.BLUE + "pelvis"
"""The bodies the camera follows: our fighter's pelvis and the opponent's (absent in one-fighter tasks)."""
PAIR_M = 4.0
"""The camera frames both fighters while their pelvises are this close (else the opponent is parked away)."""
ELEVATION_DEG = -12.0
"""The camera looks down this much."""
SOLO_AZIMUTH_DEG = 135.0
"""Its direction (about +z, from +x) when it follows our fighter alone."""
SOLO_DISTANCE_M = 2.5
"""Its distance from our pelvis then."""
PAIR_DISTANCE_GAIN = 1.0
"""Framing a pair, it backs off by this times their gap, from `SOLO_DISTANCE_M`."""
LABEL_ABOVE_PELVIS_M = 1.0
"""Punch outcomes are written this far above our pelvis..."""
LABEL_HOLD_S = 0.75
"""...for this long after the punch arrived."""


@dataclasses.dataclass(frozen=True)
class View:
    """How to draw: image size, lighting, overlays."""

    width: int = 640
    """Image width in pixels."""
    height: int = 480
    """Image height in pixels."""
    shadows: bool = False
    """Shadows and floor reflections (about 4x the time per frame with Mesa's software OpenGL)."""
    rays: bool = False
    """Vision rays, in face episodes (`overlays.add_rays`)."""
    targets: bool = False
    """The command's glove targets, in command episodes."""
    labels: bool = False
    """Punch outcomes (blocked, parried, missed, partly blocked, clean hit), in face episodes."""


def camera_pose(ours: np.ndarray, theirs: np.ndarray | None) -> tuple[np.ndarray, float, float]:
    """(lookat (3,), azimuth (deg), distance (m)) of a free camera on our pelvis `ours` (3,), or on the
    midpoint of both fighters' pelvises looking across the line between them when `theirs` is within
    `PAIR_M` of ours."""
    if theirs is None or np.linalg.norm(theirs[:2] - ours[:2]) > PAIR_M:
        return np.asarray(ours, np.float64), SOLO_AZIMUTH_DEG, SOLO_DISTANCE_M
    gap = theirs - ours
    azimuth = float(np.degrees(np.arctan2(gap[1], gap[0]))) + 90.0
    distance = SOLO_DISTANCE_M + PAIR_DISTANCE_GAIN * float(np.linalg.norm(gap[:2]))
    return 0.5 * (ours + theirs), azimuth, distance


def outcome(blocked: float, parried: float, missed: float, hit: float, clean: float, hit_score: float) -> str:
    """The label of one step's punch figures (`PUNCH_FLAGS`, the task's `punch_events`): '' when no punch
    arrived; a hit's score is the share of the 19 paths to the target clear of our guard."""
    if blocked > 0.5:
        return "parried" if parried > 0.5 else "blocked"
    if missed > 0.5:
        return "missed"
    if hit > 0.5:
        kind = "clean hit" if clean > 0.5 else "partly blocked, hit"
        return f"{kind} {hit_score:.2f}"
    return ""


def outcome_labels(records: dict[str, np.ndarray], hold_frames: int) -> list[str]:
    """Per frame of one episode's records (leaves (T, ...)), the latest punch outcome of the last
    `hold_frames` frames, '' where there is none."""
    labels, shown, age = [], "", hold_frames
    for t in range(records["qpos"].shape[0]):
        now = outcome(*(float(records[k][t]) for k in PUNCH_FLAGS))
        shown, age = (now, 0) if now else (shown, age + 1)
        labels.append(shown if age < hold_frames else "")
    return labels


def episode(records: dict[str, np.ndarray], world: int, frames: int) -> dict[str, np.ndarray]:
    """The first `frames` frames of `world` from traced records (leaves (T, worlds, ...))."""
    return {k: v[:frames, world] for k, v in records.items()}


def render_episode(
    model: mujoco.MjModel,
    records: dict[str, np.ndarray],
    view: View,
    labels: list[str] | None = None,
    marks: overlays.BlockMarks | None = None,
) -> np.ndarray:
    """(T, height, width, 3) uint8 frames of one episode's records (leaves (T, ...), `episode`), with the
    overlays `view` asks for: `labels` (one per frame) for `View.labels`, `marks` for rays and targets."""
    model = _with_buffer(model, view.width, view.height)
    data = mujoco.MjData(model)
    ours, theirs = model.body(OURS).id, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, THEIRS)
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    camera.elevation = ELEVATION_DEG
    out = np.empty((records["qpos"].shape[0], view.height, view.width, 3), np.uint8)
    with mujoco.Renderer(model, view.height, view.width) as renderer:
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = view.shadows
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = view.shadows
        for t in range(out.shape[0]):
            step = {k: v[t] for k, v in records.items()}
            _pose(model, data, step)
            opponent = data.xpos[theirs] if theirs >= 0 else None
            lookat, camera.azimuth, camera.distance = camera_pose(data.xpos[ours], opponent)
            camera.lookat[:] = lookat
            renderer.update_scene(data, camera)
            _overlay(renderer.scene, data, step, view, marks)
            if view.labels and labels and labels[t]:
                above = data.xpos[ours] + (0.0, 0.0, LABEL_ABOVE_PELVIS_M)
                overlays.add_label(renderer.scene, above, labels[t])
            renderer.render(out=out[t])
    return out


def _with_buffer(model: mujoco.MjModel, width: int, height: int) -> mujoco.MjModel:
    """`model`, or a copy whose offscreen buffer holds a `width` x `height` image."""
    buffer = model.vis.global_
    if width <= buffer.offwidth and height <= buffer.offheight:
        return model
    model = copy.copy(model)
    model.vis.global_.offwidth = max(width, buffer.offwidth)
    model.vis.global_.offheight = max(height, buffer.offheight)
    return model


def _pose(model: mujoco.MjModel, data: mujoco.MjData, step: dict[str, np.ndarray]) -> None:
    """Pose `data` as one frame's record (qpos, mocap bodies) and compute its kinematics."""
    data.qpos[:] = step["qpos"]
    if model.nmocap:
        data.mocap_pos[:] = step["mocap_pos"]
        data.mocap_quat[:] = step["mocap_quat"]
    mujoco.mj_forward(model, data)


def _overlay(
    scene: mujoco.MjvScene, data: mujoco.MjData, step: dict[str, np.ndarray], view: View, marks
) -> None:
    """Add the block overlays `view` asks for, of the frame posed in `data`."""
    if view.rays and step["face"]:
        overlays.add_rays(scene, *overlays.sight(marks, data))
    if view.targets and step["command"]:
        overlays.add_spheres(scene, overlays.command_targets(marks, data, step["command_offset"]))
