"""Traced episodes drawn offscreen with MuJoCo's own renderer (`mujoco.Renderer`), a camera that follows
the fighters, and the block task's overlays (`boxjax.viz.overlays`).

A frame is posed from what `boxjax.viz.record` kept of the step (qpos, and the mocap bodies where the model
has them), so any task's trace renders; the overlays need `record.block_record`'s fields and the arena's
`overlays.BlockMarks`. With an opponent in the world, labels say which fighter is ours; the punching bag is
not drawn in face episodes (a render-time choice: the physics is untouched). MuJoCo binds its OpenGL backend
on import: choose it first (`boxjax.platform.select_gl`).
"""

from __future__ import annotations

import copy
import dataclasses

import mujoco
import numpy as np

from boxjax.envs.block.punches import TARGETS
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
"""Punch outcomes are written this far above our pelvis, in two lines (what was hit; how)..."""
LINE_SPACING_M = 0.15
"""...this far apart, and this far to our side away from the opponent (a label starts at its point and runs
to the right, toward him)..."""
LABEL_ASIDE_M = 0.5
LABEL_HOLD_S = 0.75
"""...for this long after the punch arrived."""
FONT_SCALE_PER_240_PX = 50
"""Labels' font scale (`mujoco.mjtFontScale`, 50 to 300 in steps of 50) per 240 pixels of image height:
MuJoCo's default (150) would fill a small video's width with one label."""
NAME_ABOVE_PELVIS_M = 0.8
"""Who is who ("ours", "opponent") is written this far above each fighter's pelvis, below the outcomes."""
NAMES = ("ours", "opponent")
"""The fighters' labels: the policy's fighter, the simulated opponent."""
BAG = "bag"
"""The punching bag's body: not drawn in face episodes, where it only hangs in the background."""
HIDDEN_GROUP = 5
"""The geom group the bag's geoms are moved to in the drawing's copy of the model (no other geom uses it), so
that a frame can leave them out (`mujoco.MjvOption.geomgroup`); the physics never sees that copy."""


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
    names: bool = True
    """Which fighter is ours: "ours" and "opponent" above them, when the world has an opponent."""


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


def outcome(
    blocked: float,
    parried: float,
    missed: float,
    hit: float,
    clean: float,
    hit_score: float,
    target: str = "",
) -> str:
    """The label of one step's punch figures (`PUNCH_FLAGS`, the task's `punch_events`) for a punch at our
    `target` (head or body): '' when no punch arrived. A hit's score is the share of the 19 paths from his
    glove to the target that our guard leaves clear: 1 of 1 nothing in the way, clean from
    `BlockConfig.clean_hit_score`."""
    where = f"punch on our {target}" if target else "punch on us"
    if blocked > 0.5:
        return f"{where}: parried" if parried > 0.5 else f"{where}: blocked"
    if missed > 0.5:
        return f"{where}: missed"
    if hit > 0.5:
        return f"{where}: score {hit_score:.2f} of 1 ({'clean' if clean > 0.5 else 'partly blocked'})"
    return ""


def outcome_labels(records: dict[str, np.ndarray], hold_frames: int) -> list[str]:
    """Per frame of one episode's records (leaves (T, ...)), the latest punch outcome of the last
    `hold_frames` frames, '' where there is none; the punch's target is named where the records hold it
    (`record.block_recorder`)."""
    labels, shown, age = [], "", hold_frames
    for t in range(records["qpos"].shape[0]):
        target = TARGETS[int(records["target"][t])] if "target" in records else ""
        now = outcome(*(float(records[k][t]) for k in PUNCH_FLAGS), target=target)
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
    overlays `view` asks for: `labels` (one per frame) for `View.labels`, `marks` for rays and targets. The
    bag is left out of face episodes' frames."""
    model = _drawing_model(model, view.width, view.height)
    data = mujoco.MjData(model)
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    camera.elevation = ELEVATION_DEG
    option = mujoco.MjvOption()
    out = np.empty((records["qpos"].shape[0], view.height, view.width, 3), np.uint8)
    with mujoco.Renderer(model, view.height, view.width, font_scale=font_scale(view.height)) as renderer:
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = view.shadows
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = view.shadows
        for t in range(out.shape[0]):
            step = {k: v[t] for k, v in records.items()}
            label = labels[t] if view.labels and labels else ""
            compose(renderer.scene, model, data, (camera, option), step, view, label, marks)
            renderer.render(out=out[t])
    return out


def compose(
    scene: mujoco.MjvScene,
    model: mujoco.MjModel,
    data: mujoco.MjData,
    tools: tuple[mujoco.MjvCamera, mujoco.MjvOption],
    step: dict[str, np.ndarray],
    view: View,
    label: str = "",
    marks: overlays.BlockMarks | None = None,
) -> None:
    """Fill `scene` with one frame (no OpenGL needed): `data` posed as `step`'s record, the free camera and
    the visual options of `tools` set for it (the bag's `HIDDEN_GROUP` off in a face episode), then the
    overlays `view` asks for, the fighters' `NAMES` and the outcome `label` ('' for none). `model` is
    `_drawing_model`'s."""
    camera, option = tools
    _pose(model, data, step)
    ours, theirs = model.body(OURS).id, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, THEIRS)
    opponent = data.xpos[theirs] if theirs >= 0 else None
    lookat, camera.azimuth, camera.distance = camera_pose(data.xpos[ours], opponent)
    camera.lookat[:] = lookat
    option.geomgroup[HIDDEN_GROUP] = not step.get("face", False)
    mujoco.mjv_updateScene(model, data, option, None, camera, mujoco.mjtCatBit.mjCAT_ALL.value, scene)
    _overlay(scene, data, step, view, marks)
    if view.names and opponent is not None:
        _add_names(scene, data.xpos[ours], opponent)
    if label:
        _add_outcome(scene, data.xpos[ours], opponent, label)


def _add_outcome(scene: mujoco.MjvScene, ours: np.ndarray, theirs: np.ndarray | None, label: str) -> None:
    """The outcome `label` above our pelvis `ours` (3,), split after its first ': ' into two lines, moved
    aside from the opponent's pelvis `theirs` (3,) (None: no opponent)."""
    anchor = ours + (0.0, 0.0, LABEL_ABOVE_PELVIS_M)
    if theirs is not None:
        away = (ours - theirs)[:2]
        anchor[:2] += LABEL_ASIDE_M * away / max(float(np.linalg.norm(away)), 1e-6)
    head, _, tail = label.partition(": ")
    lines = [f"{head}:", tail] if tail else [head]
    for i, line in enumerate(lines):
        overlays.add_label(scene, anchor + (0.0, 0.0, LINE_SPACING_M * (len(lines) - 1 - i)), line)


def font_scale(height: int) -> mujoco.mjtFontScale:
    """The labels' font scale of a `height`-pixel image (`FONT_SCALE_PER_240_PX`)."""
    scale = min(300, max(50, FONT_SCALE_PER_240_PX * round(height / 240)))
    return mujoco.mjtFontScale(scale)


def _add_names(scene: mujoco.MjvScene, ours: np.ndarray, theirs: np.ndarray) -> None:
    """`NAMES` above our pelvis `ours` (3,) and, while he stands within `PAIR_M` (in the picture), above
    the opponent's `theirs` (3,)."""
    overlays.add_label(scene, ours + (0.0, 0.0, NAME_ABOVE_PELVIS_M), NAMES[0])
    if np.linalg.norm(theirs[:2] - ours[:2]) <= PAIR_M:
        overlays.add_label(scene, theirs + (0.0, 0.0, NAME_ABOVE_PELVIS_M), NAMES[1])


def _drawing_model(model: mujoco.MjModel, width: int, height: int) -> mujoco.MjModel:
    """A copy of `model` to draw with: an offscreen buffer of at least `width` x `height`, and the bag's
    geoms (if any) in `HIDDEN_GROUP`."""
    model = copy.copy(model)  # MuJoCo copies the whole model
    buffer = model.vis.global_
    buffer.offwidth, buffer.offheight = max(width, buffer.offwidth), max(height, buffer.offheight)
    bag = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, BAG)
    if bag >= 0:
        model.geom_group[model.geom_bodyid == bag] = HIDDEN_GROUP
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
