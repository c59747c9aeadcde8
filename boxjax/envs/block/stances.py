"""The simulated opponent's two stances for procedural punches: orthodox, the recorded guard (his left hand
leading), and southpaw, its mirror image about the fighters' centre line (his right hand leading).

The arena's scene stands both fighters' centres of mass on the line y = 0 (`boxjax.mjcf.arena`), so the
vertical plane through it is the mirror: his hinges mirrored (`boxjax.mjcf.mirror.joint_mirror`: left and
right swapped, the midline hinges about x and z negated) and his pelvis, the root anchor he is welded to
(`boxjax.mjcf.sparring`), mirrored with them (`mirror.mirror_pose`). A procedural punch's own joints are
mirrored in its spec (`procedural.spec_of`); `Stances` holds the rest of his guard and his root, which the
env picks by the punch's `southpaw` flag.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from boxjax.mjcf import mirror


@dataclasses.dataclass(frozen=True)
class Stances:
    """The opponent's guard in both stances, orthodox (row 0) then southpaw (row 1); float32."""

    ctrl: np.ndarray
    """(2, U) his PD targets."""
    root_pos: np.ndarray
    """(2, 3) his root anchor's position in the recorded scene."""
    root_quat: np.ndarray
    """(2, 4) its orientation (w, x, y, z)."""


def stances(
    body: str, actuators: Sequence[str], guard_ctrl: np.ndarray, root_pos: np.ndarray, root_quat: np.ndarray
) -> Stances:
    """Both stances of an opponent of `body` whose actuators (U,) are named after his hinges (unprefixed)
    and whose orthodox guard is `guard_ctrl` (U,) with his root anchor at `root_pos` (3,), `root_quat` (4,)
    in the scene (the centre line on y = 0)."""
    mirror_of, sign = mirror.joint_mirror(body, actuators)
    guard_ctrl = np.asarray(guard_ctrl, np.float32)
    pos, quat = mirror.mirror_pose(root_pos, root_quat)
    return Stances(
        ctrl=np.stack([guard_ctrl, sign * guard_ctrl[mirror_of]]).astype(np.float32),
        root_pos=np.stack([root_pos, pos]).astype(np.float32),
        root_quat=np.stack([root_quat, quat]).astype(np.float32),
    )
