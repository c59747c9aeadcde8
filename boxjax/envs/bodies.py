"""What each body needs to run every task, in one place: its builder variant, its contact budgets, its
walking teacher and its punch-library entries.

`needs(body)` gathers them from where each lives (`boxjax.mjcf` builds and budgets, the walk package ships
the teachers, the block package the punch library) and names what is missing, so adding a body is: a
`boxjax.mjcf.boxer` variant, its measured budgets (`boxjax.mjcf.budget`), a trained teacher
(`boxjax train --task walk`, exported with `walk.teacher.export_teacher`) and the library remade for it
(`experiments/make_punches.py`). ``python -m boxjax.envs.bodies`` prints the table.
"""

from __future__ import annotations

import dataclasses
import os

from boxjax.mjcf import BODIES, budget
from boxjax.mjcf.boxer import Variant, variant


@dataclasses.dataclass(frozen=True)
class BodyNeeds:
    """One body's requirements and where each is met."""

    body: str
    variant: Variant
    """How the builder makes it (`boxjax.mjcf.boxer`)."""
    alone: budget.ContactBudget
    """Contact and constraint slots of one fighter alone (stance, walk)."""
    block: budget.ContactBudget
    """Slots of the block world: this fighter against the default simulated opponent."""
    teacher: str | None
    """The shipped walking teacher's file, None when none ships."""
    punches: bool
    """Whether the shipped punch library was made for this body (its recorded punches as its joint angles)."""

    def missing(self) -> list[str]:
        """What this body lacks for some task, in words ([] when it runs everything)."""
        out = []
        if self.teacher is None:
            out.append("no shipped walking teacher (block --teacher auto distils none)")
        if not self.punches:
            out.append("no entries in the shipped punch library (no simulated opponent of this body)")
        return out


def needs(body: str) -> BodyNeeds:
    """`BodyNeeds` of `body`; raises `ValueError` naming the valid bodies for any other name."""
    from boxjax.envs.block import punches
    from boxjax.envs.block.config import BlockConfig
    from boxjax.envs.walk import teacher

    shape = variant(body)  # names the valid bodies for an unknown one
    path = os.path.join(teacher.SHIPPED_DIR, f"walk-{body}.msgpack")
    return BodyNeeds(
        body=body,
        variant=shape,
        alone=budget.budget(body, opponent=False),
        block=BlockConfig(body=body).contact_budget(),
        teacher=path if os.path.isfile(path) else None,
        punches=body in punches.load().bodies,
    )


def table() -> str:
    """Every body's needs as a Markdown table."""
    rows = ["| body | build | contacts / rows alone | block world | teacher | punches | missing |"]
    rows.append("|---|---|---|---|---|---|---|")
    for body in BODIES:
        n = needs(body)
        rows.append(
            f"| {body} | {'detailed' if n.variant.detailed else 'skeleton'} | "
            f"{n.alone.ncon_per_world} / {n.alone.njmax} | {n.block.ncon_per_world} / {n.block.njmax} | "
            f"{os.path.basename(n.teacher) if n.teacher else '-'} | {'yes' if n.punches else 'no'} | "
            f"{'; '.join(n.missing()) or '-'} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
