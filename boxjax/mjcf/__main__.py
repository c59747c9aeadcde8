"""`python -m boxjax.mjcf BODY`: prints a summary of one body in the single-fighter arena."""

from __future__ import annotations

import argparse

import mujoco
import numpy as np

from boxjax.mjcf import BODIES, build
from boxjax.mjcf.budget import budget


def candidate_pairs(model: mujoco.MjModel) -> int:
    """Geom pairs that pass the contype/conaffinity, same-body, parent-child and exclude filters."""
    excluded = {(int(s) >> 16, int(s) & 0xFFFF) for s in model.exclude_signature}
    bodies, parent = model.geom_bodyid, model.body_parentid
    count = 0
    for i in range(model.ngeom):
        for j in range(i + 1, model.ngeom):
            ct = model.geom_contype
            ca = model.geom_conaffinity
            if not (ct[i] & ca[j] or ct[j] & ca[i]):
                continue
            b1, b2 = sorted((int(bodies[i]), int(bodies[j])))
            if b1 == b2 or (b1 != 0 and (parent[b2] == b1 or parent[b1] == b2)) or (b1, b2) in excluded:
                continue
            count += 1
    return count


def summary(body: str) -> str:
    """A few lines describing `body`: sizes, mass, height, contact budget."""
    model, index = build(body)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, index.keyframes["stand"])
    mujoco.mj_forward(model, data)
    fighter = np.isin(model.geom_bodyid, index.red.body_ids)
    top = data.geom_xpos[fighter, 2] + model.geom_rbound[fighter]
    single, pair = budget(body, False), budget(body, True)
    return "\n".join(
        [
            f"body            {body}",
            f"DoF (nv)        {model.nv}",
            f"nq              {model.nq}",
            f"actuators       {model.nu}",
            f"action size     {index.red.action_size}",
            f"geoms           {int(fighter.sum())} (+ floor)",
            f"muscle geoms    {index.red.muscle_geom_ids.size}",
            f"total mass      {model.body_subtreemass[index.red.pelvis_body]:.1f} kg",
            f"height (stand)  {top.max():.2f} m",
            f"candidate pairs {candidate_pairs(model)}",
            f"contact budget  {single} alone, {pair} with an opponent",
        ]
    )


def main() -> None:
    """Parses BODY and prints its summary."""
    parser = argparse.ArgumentParser(prog="python -m boxjax.mjcf", description=__doc__)
    parser.add_argument("body", choices=BODIES)
    print(summary(parser.parse_args().body))


if __name__ == "__main__":
    main()
