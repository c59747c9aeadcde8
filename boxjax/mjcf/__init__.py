"""Bodies and arena, built in code with `mujoco.MjSpec`.

Bodies (one kinematic tree each, free root `pelvis`, one position actuator per hinge):

=============  ==  ==  ===========  ==============================================================
body           nv  nu  action size  notes
=============  ==  ==  ===========  ==============================================================
muscular       89  83  45           clavicles, 20 finger joints per hand, 63 colliding muscles,
                                    box feet
muscular-fast  89  83  45           same joints and actuators; muscles do not collide, capsule feet
simple         43  37  37           capsules and spheres only, no clavicles or fingers
=============  ==  ==  ===========  ==============================================================

Coupled finger joints (detailed bodies): per hand, `thumb_cmc_flex`, `thumb_cmc_abd`, `thumb_mcp`,
`thumb_ip` and, for index/middle/ring/little, `<finger>_mcp_flex`, `<finger>_mcp_abd`, `<finger>_pip`,
`<finger>_dip` (suffix `_l`/`_r`): all 20 of a hand are driven by one "grip" action dimension
(`FighterIndex.action_group`), the last two action dims (left, right).

Contact budgets: `CONTACT_BUDGET[body]` (one fighter), `PAIR_BUDGET[body]` (two fighters), or
`boxjax.mjcf.budget.budget(body, opponent)`.
"""

from boxjax.mjcf.arena import build
from boxjax.mjcf.boxer import BODIES, CCD_ITERATIONS, SOLVER_ITERATIONS, boxer_spec
from boxjax.mjcf.budget import CONTACT_BUDGET, PAIR_BUDGET, ContactBudget
from boxjax.mjcf.indexing import ArenaIndex, FighterIndex

__all__ = [
    "BODIES",
    "CCD_ITERATIONS",
    "CONTACT_BUDGET",
    "PAIR_BUDGET",
    "SOLVER_ITERATIONS",
    "ArenaIndex",
    "ContactBudget",
    "FighterIndex",
    "boxer_spec",
    "build",
]
