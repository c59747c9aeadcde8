"""Collision bits (contype, conaffinity) shared by the boxer, the arena and the bag.

Two geoms collide when `contype1 & conaffinity2 or contype2 & conaffinity1`. Each fighter owns a team
bit; a fighter geom's conaffinity names the floor and the *other* team, so a fighter never collides
with itself except through `SELF`, which only the muscles of the `muscular` body carry.
"""

from __future__ import annotations

import mujoco

FLOOR = 1
RED = 2
BLUE = 4
SELF = 8
BAG = 16

FLOOR_GEOM = (FLOOR, 0)
"""The floor: touches every geom whose conaffinity has `FLOOR`."""
BAG_GEOM = (BAG, RED | BLUE)
"""The punching bag: touches both fighters, not the floor."""
STRIKE = (RED, FLOOR | BLUE)
"""Bones, head and gloves: floor, opponent and bag."""
MUSCLE_FULL = (RED | SELF, FLOOR | BLUE | SELF)
"""`muscular` muscles: as `STRIKE`, and muscle against muscle within one fighter."""
FLOOR_ONLY = (0, FLOOR)
"""Feet: the floor only, so box feet never meet an ellipsoid or another box."""
NONE = (0, 0)
"""Fingers, palms, clavicles, neck and the `muscular-fast` muscles: visual/mass only."""


def _swap(bits: int) -> int:
    red, blue = bits & RED, bits & BLUE
    return (bits & ~(RED | BLUE)) | (BLUE if red else 0) | (RED if blue else 0)


def swap_team(spec: mujoco.MjSpec) -> None:
    """Turns a red fighter spec into a blue one (in place) by exchanging the team bits."""
    for geom in spec.geoms:
        geom.contype = _swap(geom.contype)
        geom.conaffinity = _swap(geom.conaffinity)


def clear_floor(spec: mujoco.MjSpec) -> None:
    """Takes the floor out of every geom's conaffinity (in place): the fighter never touches the floor."""
    for geom in spec.geoms:
        geom.conaffinity = geom.conaffinity & ~FLOOR
