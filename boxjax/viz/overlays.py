"""The overlays of a frame, added to MuJoCo's scene as geoms after `update_scene`: the block task's vision
rays and command targets, computed from the pose being drawn (MuJoCo C's kinematics of the frame, so they
match it, the reset frame too), and a text label.

Rays run from our eyes to the opponent's 32 vision points (`boxjax.envs.block.vision`), in one colour when
he sees the point and another when his gloves hide it; the command's glove targets are small spheres.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from boxjax.envs import frames
from boxjax.envs.block import vision

VISIBLE_RGBA = (0.2, 0.9, 0.3, 0.9)
HIDDEN_RGBA = (0.95, 0.2, 0.2, 0.9)
"""Vision rays to points our fighter sees, and to points hidden behind his gloves."""
RAY_WIDTH_PX = 2.0
TARGET_RGBA = (1.0, 0.85, 0.1, 0.7)
TARGET_RADIUS_M = 0.04
"""The command's glove targets: spheres of this radius."""
LABEL_RGBA = (1.0, 1.0, 1.0, 1.0)
POSES = ("site_xpos", "site_xmat", "xpos", "xmat", "geom_xpos", "geom_xmat")
"""The kinematics `vision.see` reads."""


@dataclasses.dataclass(frozen=True, eq=False)
class BlockMarks:
    """What the block overlays read of the arena, resolved once (`block_marks`)."""

    vision: vision.VisionIndex
    """Our eyes, the opponent's vision points, our gloves."""
    root_qpos_adr: int
    """First qpos of our fighter's free joint (the heading of the command's frame)."""
    head_body: int
    """Our head: the origin of the command's glove targets."""


def block_marks(env: Any) -> BlockMarks:
    """The `BlockMarks` of a `boxjax.envs.block.BlockEnv`."""
    return BlockMarks(
        vision=env.vision_index, root_qpos_adr=int(env.me.qpos_adr), head_body=int(env.me.head_body)
    )


def sight(marks: BlockMarks, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(eyes (3,), the opponent's points (32, 3), visible (32,) bool) in `data` after its kinematics."""
    frame, points = _sight({name: getattr(data, name) for name in POSES}, marks.vision)
    visible = np.asarray(frame).reshape(vision.NUM_POINTS, 4)[:, 3] > 0.5
    return data.site_xpos[marks.vision.eyes_site], np.asarray(points), visible


@functools.partial(jax.jit, static_argnums=1)
def _sight(poses: dict[str, jax.Array], index: vision.VisionIndex) -> tuple[jax.Array, jax.Array]:
    """(vision frame (FRAME_SIZE,), points (32, 3)) of the `POSES` of a frame."""
    data = types.SimpleNamespace(**poses)
    return vision.see(data, index), vision.target_points(data.site_xpos, data.xpos, data.xmat, index)


def command_targets(marks: BlockMarks, data: mujoco.MjData, offset: np.ndarray) -> np.ndarray:
    """(2, 3) world glove targets of a command's `offset` (2, 3): from our head, in our pelvis' heading
    frame (as `boxjax.envs.block.kinds.kind_task` measures the gloves)."""
    quat = data.qpos[marks.root_qpos_adr + 3 : marks.root_qpos_adr + 7]
    turned = frames.turn_xy(jnp.asarray(offset[:, :2]), frames.yaw(jnp.asarray(quat)))
    return data.xpos[marks.head_body] + np.concatenate([np.asarray(turned), offset[:, 2:]], axis=-1)


def add_rays(scene: mujoco.MjvScene, eyes: np.ndarray, points: np.ndarray, visible: np.ndarray) -> None:
    """A line from `eyes` (3,) to each of `points` (P, 3), coloured by `visible` (P,)."""
    for point, seen in zip(points, visible, strict=True):
        geom = new_geom(scene, mujoco.mjtGeom.mjGEOM_LINE, VISIBLE_RGBA if seen else HIDDEN_RGBA)
        mujoco.mjv_connector(geom, mujoco.mjtGeom.mjGEOM_LINE, RAY_WIDTH_PX, eyes, point)


def add_spheres(scene: mujoco.MjvScene, centres: np.ndarray) -> None:
    """A target sphere at each of `centres` (N, 3)."""
    for centre in centres:
        geom = new_geom(scene, mujoco.mjtGeom.mjGEOM_SPHERE, TARGET_RGBA)
        geom.size[:] = TARGET_RADIUS_M
        geom.pos[:] = centre


def add_label(scene: mujoco.MjvScene, position: np.ndarray, text: str) -> None:
    """`text` written at `position` (3,)."""
    geom = new_geom(scene, mujoco.mjtGeom.mjGEOM_LABEL, LABEL_RGBA)
    geom.pos[:] = position
    geom.label = text


def new_geom(scene: mujoco.MjvScene, kind: mujoco.mjtGeom, rgba: tuple[float, ...]) -> mujoco.MjvGeom:
    """The scene's next geom, initialised as `kind` in colour `rgba` at the origin (place it after)."""
    if scene.ngeom >= scene.maxgeom:
        raise ValueError(f"the scene holds {scene.maxgeom} geoms and is full: no room for the overlays")
    geom = scene.geoms[scene.ngeom]
    eye = np.eye(3).reshape(-1)
    mujoco.mjv_initGeom(geom, kind, np.zeros(3), np.zeros(3), eye, np.asarray(rgba, np.float32))
    scene.ngeom += 1
    return geom
