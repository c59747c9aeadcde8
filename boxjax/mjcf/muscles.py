"""The 63 ellipsoid "muscle" geoms of the detailed bodies.

Muscles shape the body for contacts and looks; the bones carry all the mass, so muscles are massless.
Positions are in the frame of the body they sit on, written for the left side and mirrored in y.
"""

from __future__ import annotations

import mujoco

from boxjax.mjcf import collision

_ELLIPSOID = mujoco.mjtGeom.mjGEOM_ELLIPSOID

# (name, body, pos, semi-axes) on the midline.
_CENTRE = (
    ("abs_upper", "chest", (0.095, 0, 0.02), (0.03, 0.07, 0.07)),
    ("abs_lower", "lumbar", (0.075, 0, 0.04), (0.03, 0.065, 0.07)),
    ("neck_extensor", "neck", (-0.03, 0, 0.04), (0.025, 0.035, 0.05)),
)

# (name, body without side, pos on the left, semi-axes); each gives `muscle_<name>_l` and `_r`.
_PAIRED = (
    ("pectoral", "chest", (0.09, 0.08, 0.17), (0.035, 0.075, 0.06)),
    ("trapezius", "chest", (-0.05, 0.07, 0.25), (0.04, 0.07, 0.035)),
    ("latissimus", "chest", (-0.07, 0.11, 0.07), (0.04, 0.05, 0.10)),
    ("serratus", "chest", (0.04, 0.12, 0.07), (0.04, 0.035, 0.06)),
    ("oblique", "lumbar", (0.04, 0.09, 0.05), (0.04, 0.03, 0.07)),
    ("erector", "lumbar", (-0.07, 0.035, 0.06), (0.03, 0.025, 0.09)),
    ("gluteus", "pelvis", (-0.07, 0.08, -0.04), (0.05, 0.07, 0.07)),
    ("iliopsoas", "pelvis", (0.05, 0.06, 0.0), (0.03, 0.03, 0.05)),
    ("sternocleidomastoid", "neck", (0.03, 0.03, 0.04), (0.015, 0.015, 0.05)),
    ("deltoid_front", "upper_arm", (0.035, 0.01, -0.05), (0.025, 0.03, 0.06)),
    ("deltoid_side", "upper_arm", (0.0, 0.04, -0.06), (0.025, 0.03, 0.06)),
    ("deltoid_rear", "upper_arm", (-0.035, 0.01, -0.05), (0.025, 0.03, 0.06)),
    ("biceps", "upper_arm", (0.035, 0, -0.16), (0.025, 0.025, 0.08)),
    ("triceps", "upper_arm", (-0.035, 0, -0.15), (0.03, 0.028, 0.09)),
    ("brachialis", "upper_arm", (0.01, 0.03, -0.20), (0.02, 0.02, 0.06)),
    ("forearm_flexor", "forearm", (0, -0.025, -0.08), (0.025, 0.02, 0.08)),
    ("forearm_extensor", "forearm", (0, 0.025, -0.08), (0.025, 0.02, 0.08)),
    ("brachioradialis", "forearm", (0.03, 0, -0.06), (0.02, 0.02, 0.07)),
    ("thenar", "hand", (0.02, -0.02, -0.03), (0.015, 0.012, 0.025)),
    ("rectus_femoris", "thigh", (0.05, 0, -0.20), (0.035, 0.035, 0.15)),
    ("vastus_lateralis", "thigh", (0.01, 0.05, -0.22), (0.035, 0.03, 0.14)),
    ("vastus_medialis", "thigh", (0.03, -0.04, -0.30), (0.03, 0.03, 0.09)),
    ("biceps_femoris", "thigh", (-0.05, 0.02, -0.22), (0.03, 0.03, 0.14)),
    ("semitendinosus", "thigh", (-0.045, -0.03, -0.22), (0.03, 0.03, 0.14)),
    ("adductor", "thigh", (0, -0.045, -0.12), (0.03, 0.03, 0.10)),
    ("tensor_fasciae_latae", "thigh", (0.02, 0.06, -0.06), (0.02, 0.02, 0.05)),
    ("gastrocnemius_medial", "shin", (-0.04, -0.02, -0.10), (0.03, 0.025, 0.08)),
    ("gastrocnemius_lateral", "shin", (-0.04, 0.02, -0.10), (0.03, 0.025, 0.08)),
    ("soleus", "shin", (-0.03, 0, -0.20), (0.03, 0.035, 0.09)),
    ("tibialis_anterior", "shin", (0.035, 0.01, -0.15), (0.018, 0.018, 0.11)),
)

NUM_MUSCLES = len(_CENTRE) + 2 * len(_PAIRED)
"""63: the count the detailed bodies promise."""

# Paired muscles on the torso sit on an unsided body ("chest"); limb muscles on "<body>_<side>".
_TORSO = ("pelvis", "lumbar", "chest", "neck")


def _add(spec: mujoco.MjSpec, name: str, body: str, pos, size, bits: tuple[int, int]) -> None:
    spec.body(body).add_geom(
        name=name,
        type=_ELLIPSOID,
        pos=list(pos),
        size=list(size),
        mass=0.0,
        contype=bits[0],
        conaffinity=bits[1],
        group=1,
        rgba=[0.7, 0.25, 0.25, 1],
    )


def add_muscles(spec: mujoco.MjSpec, collide: bool) -> None:
    """Adds the 63 muscle geoms (`muscle_<name>[_l|_r]`) to a detailed boxer spec.

    Args:
      spec: a spec holding the detailed skeleton.
      collide: muscles touch floor, opponent and each other (`muscular`); else they are visual only.
    """
    bits = collision.MUSCLE_FULL if collide else collision.NONE
    for name, body, pos, size in _CENTRE:
        _add(spec, f"muscle_{name}", body, pos, size, bits)
    for name, body, (x, y, z), size in _PAIRED:
        for s, sign in (("l", 1.0), ("r", -1.0)):
            target = body if body in _TORSO else f"{body}_{s}"
            _add(spec, f"muscle_{name}_{s}", target, (x, sign * y, z), size, bits)
