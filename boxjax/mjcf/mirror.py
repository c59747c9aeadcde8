"""A fighter mirrored about his sagittal plane (his x-z plane, y -> -y): a southpaw from an orthodox pose.

Reflection M = diag(1, -1, 1) turns a rotation by angle a about axis n into a rotation by a about -M n
(M R(n, a) M = R(det(M) M n, a)). So a hinge's mirror image is the hinge at the mirrored anchor whose axis
is parallel to M n: the same angle where that axis is -M n, the negated angle where it is M n. On our
bodies (`boxer`) every left hinge's partner is its right twin at the same angle (the right side's x and z
axes are written mirrored), and the midline hinges are their own partners: those about x and z
(lumbar_x/z, thorax_x/z, neck_x/z, head_x) change sign, those about y do not. `joint_mirror` reads this
from the compiled body (anchors and axes at qpos0) rather than from the names, and refuses a body that is
not its own mirror image.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import mujoco
import numpy as np

from boxjax.mjcf import boxer

REFLECT = np.array([1.0, -1.0, 1.0])
"""The mirror of a vector in the body's frame (and in the arena's, about its centre line y = 0)."""
TOLERANCE = 1e-9


@functools.cache
def _hinges(body: str) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
    """(names, (H, 3) anchors, (H, 3) axes, (H, 2) ranges) of `body`'s hinges at qpos0, pelvis at the
    origin of its own frame."""
    model = boxer.boxer_spec(body).compile()
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    hinge = np.flatnonzero(model.jnt_type == mujoco.mjtJoint.mjJNT_HINGE)
    pelvis = data.xpos[model.body("pelvis").id]
    names = tuple(model.joint(j).name for j in hinge)
    return names, data.xanchor[hinge] - pelvis, data.xaxis[hinge], model.jnt_range[hinge]


@functools.cache
def _mirror_of(body: str) -> dict[str, tuple[str, float]]:
    """{hinge: (its partner, sign)} of every hinge of `body`."""
    names, anchors, axes, ranges = _hinges(body)
    out = {}
    for j, name in enumerate(names):
        image = anchors[j] * REFLECT
        along = axes @ (axes[j] * REFLECT)
        match = np.flatnonzero(
            (np.abs(anchors - image).max(axis=1) < TOLERANCE) & (np.abs(np.abs(along) - 1.0) < TOLERANCE)
        )
        if match.size != 1:
            raise ValueError(f"{body}: hinge {name!r} has {match.size} mirror images, not one")
        k = int(match[0])
        sign = -float(np.round(along[k]))
        if not np.allclose(np.sort(sign * ranges[j]), ranges[k], atol=TOLERANCE):
            raise ValueError(f"{body}: hinge {name!r} mirrors to {names[k]!r} with another range")
        out[name] = (names[k], sign)
    return out


def joint_mirror(body: str, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The mirror of joint vectors over `names` (hinges of `body`): q'[i] = sign[i] * q[partner[i]].

    Args:
      body: one of `boxer.BODIES`.
      names: hinge names (unprefixed); every one's partner must be among them.

    Returns:
      ((N,) int32 partner, (N,) float32 sign); applying it twice gives q back.

    Raises:
      ValueError: a name that is no hinge of `body`, or whose partner is not in `names`.
    """
    mirror = _mirror_of(body)
    unknown = [n for n in names if n not in mirror]
    if unknown:
        raise ValueError(f"{body}: no hinges {unknown}")
    partner = [mirror[n][0] for n in names]
    outside = sorted(set(partner) - set(names))
    if outside:
        raise ValueError(f"mirrored joints {outside} are not among the joints given")
    index = {n: i for i, n in enumerate(names)}
    return (
        np.array([index[p] for p in partner], np.int32),
        np.array([mirror[n][1] for n in names], np.float32),
    )


def mirror_pose(pos: np.ndarray, quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A body's position (3,) and orientation (4,) (w, x, y, z) mirrored about the plane y = 0:
    (x, -y, z) and M R M = the quaternion (w, -x, y, -z)."""
    pos, quat = np.asarray(pos), np.asarray(quat)
    return pos * REFLECT, quat * np.array([1.0, -1.0, 1.0, -1.0])
