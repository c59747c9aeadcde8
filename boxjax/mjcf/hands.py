"""Fingers of the detailed bodies: a thumb and four fingers per hand, 20 hinges in all.

They sit inside the glove, so they carry mass but never collide. One policy action ("grip") drives
all 20 finger actuators of a hand; see `boxjax.mjcf.indexing`.
"""

from __future__ import annotations

import mujoco

from boxjax.mjcf.joints import hinge

_CAPSULE = mujoco.mjtGeom.mjGEOM_CAPSULE
_SEGMENT_MASS = 0.01
_RADIUS = 0.008

# (finger, knuckle x on the palm, segment lengths proximal/middle/distal)
_LONG_FINGERS = (
    ("index", 0.03, (0.045, 0.028, 0.022)),
    ("middle", 0.01, (0.048, 0.030, 0.022)),
    ("ring", -0.01, (0.045, 0.028, 0.021)),
    ("little", -0.03, (0.036, 0.022, 0.019)),
)


def _segment(parent, name: str, pos, length: float):
    body = parent.add_body(name=name, pos=list(pos))
    body.add_geom(
        name=name,
        type=_CAPSULE,
        fromto=[0, 0, 0, 0, 0, -length],
        size=[_RADIUS, 0, 0],
        mass=_SEGMENT_MASS,
        contype=0,
        conaffinity=0,
        rgba=[0.85, 0.7, 0.55, 1],
    )
    return body


def add_fingers(hand, s: str, sign: float) -> None:
    """Adds the thumb and four fingers to a hand body (fingers hang along -z, palm facing medially).

    Args:
      hand: the `hand_{s}` body.
      s: "l" or "r".
      sign: +1 on the left, -1 on the right (mirrors the x and z axes).
    """
    # Flexion curls the fingers towards the palm, which faces -y on the left hand.
    flex = [-sign, 0, 0]
    for finger, x, (l1, l2, l3) in _LONG_FINGERS:
        prox = _segment(hand, f"{finger}_prox_{s}", [x, 0, -0.09], l1)
        hinge(prox, f"{finger}_mcp_flex_{s}", flex, [0.0, 1.6])
        hinge(prox, f"{finger}_mcp_abd_{s}", [0, 1, 0], [-0.25, 0.25])
        mid = _segment(prox, f"{finger}_mid_{s}", [0, 0, -l1], l2)
        hinge(mid, f"{finger}_pip_{s}", flex, [0.0, 1.9])
        dist = _segment(mid, f"{finger}_dist_{s}", [0, 0, -l2], l3)
        hinge(dist, f"{finger}_dip_{s}", flex, [0.0, 1.4])

    meta = _segment(hand, f"thumb_meta_{s}", [0.025, -0.02 * sign, -0.02], 0.04)
    hinge(meta, f"thumb_cmc_flex_{s}", [0, 0, sign], [-0.3, 1.0])
    hinge(meta, f"thumb_cmc_abd_{s}", flex, [-0.2, 1.0])
    prox = _segment(meta, f"thumb_prox_{s}", [0, 0, -0.04], 0.03)
    hinge(prox, f"thumb_mcp_{s}", flex, [0.0, 1.2])
    dist = _segment(prox, f"thumb_dist_{s}", [0, 0, -0.03], 0.025)
    hinge(dist, f"thumb_ip_{s}", flex, [0.0, 1.4])
