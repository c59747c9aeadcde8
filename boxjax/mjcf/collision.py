"""Collision bits (contype, conaffinity) shared by the boxer, the arena and the bag.

Two geoms collide when `contype1 & conaffinity2 or contype2 & conaffinity1`. Each fighter owns a team
bit; a fighter geom's conaffinity names the floor and the *other* team, so a fighter never collides
with itself except through `SELF`, which only the muscles of the `muscular` body carry. Muscles carry their
team's muscle bit instead of the team bit: of the other side they touch only the gloves (the one thing a
punch lands or is stopped with), never his bones, head, muscles or the bag, pairs that decide nothing
but cost a convex-collision test each.
"""

from __future__ import annotations

import mujoco

FLOOR = 1
RED = 2
BLUE = 4
SELF = 8
BAG = 16
RED_MUSCLES = 32
BLUE_MUSCLES = 64

FLOOR_GEOM = (FLOOR, 0)
"""The floor: touches every geom whose conaffinity has `FLOOR`."""
BAG_GEOM = (BAG, RED | BLUE)
"""The punching bag: touches both fighters, not the floor."""
STRIKE = (RED, FLOOR | BLUE)
"""Bones and head: floor, the opponent's bones, head and gloves, and the bag."""
GLOVE = (RED, FLOOR | BLUE | BLUE_MUSCLES)
"""Gloves: as `STRIKE`, and the opponent's muscles."""
MUSCLE_FULL = (RED_MUSCLES | SELF, FLOOR | SELF)
"""`muscular` muscles: the floor, muscle against muscle within one fighter, and the opponent's gloves."""
FLOOR_ONLY = (0, FLOOR)
"""Feet: the floor only, so box feet never meet an ellipsoid or another box."""
NONE = (0, 0)
"""Fingers, palms, clavicles, neck and the `muscular-fast` muscles: visual/mass only."""


def _swap(bits: int) -> int:
    out = bits & ~(RED | BLUE | RED_MUSCLES | BLUE_MUSCLES)
    for ours, theirs in ((RED, BLUE), (RED_MUSCLES, BLUE_MUSCLES)):
        out |= (theirs if bits & ours else 0) | (ours if bits & theirs else 0)
    return out


def swap_team(spec: mujoco.MjSpec) -> None:
    """Turns a red fighter spec into a blue one (in place) by exchanging the team bits."""
    for geom in spec.geoms:
        geom.contype = _swap(geom.contype)
        geom.conaffinity = _swap(geom.conaffinity)


def clear_floor(spec: mujoco.MjSpec) -> None:
    """Takes the floor out of every geom's conaffinity (in place): the fighter never touches the floor."""
    for geom in spec.geoms:
        geom.conaffinity = geom.conaffinity & ~FLOOR
