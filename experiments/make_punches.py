"""Write the punch files (how they are made: `boxjax.envs.block.authoring`).

python experiments/make_punches.py            # the classic library, boxjax/data/punches.npz
python experiments/make_punches.py --bank     # the procedural punches' bank, boxjax/data/punch-bank.npz
python experiments/make_punches.py --heldout  # the held-out set, boxjax/data/punches-heldout.npz
python experiments/make_punches.py --heldout-southpaw  # its southpaw twin, punches-heldout-southpaw.npz
"""

from __future__ import annotations

import argparse

from boxjax.envs.block import procedural, punches
from boxjax.envs.block.authoring import (
    HELDOUT_SEED,
    HELDOUT_SEQUENCES,
    HELDOUT_SOUTHPAW_SEED,
    build,
    build_bank,
)

HELDOUT = {
    "heldout": (procedural.HELDOUT_PATH, HELDOUT_SEED, 0.0),
    "heldout_southpaw": (procedural.HELDOUT_SOUTHPAW_PATH, HELDOUT_SOUTHPAW_SEED, 1.0),
}
"""The held-out sets by option: (file, seed, southpaw share)."""


def parse() -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=punches.DEFAULT_PATH)
    p.add_argument("--body", default="simple", help="body the IK is solved on")
    p.add_argument("--distance", type=float, default=0.7, help="centre-of-mass distance of the fighters (m)")
    p.add_argument("--rate", type=float, default=100.0, help="frames per second")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--bank", action="store_true", help="write the procedural punches' keyframe bank")
    what.add_argument("--heldout", action="store_true", help="write the shipped held-out punch set")
    what.add_argument(
        "--heldout-southpaw", action="store_true", help="write the shipped southpaw held-out punch set"
    )
    return p.parse_args()


def main() -> None:
    """Build the library (or the bank, or a held-out set) and write it."""
    args = parse()
    if args.bank:
        out = args.out if args.out != punches.DEFAULT_PATH else procedural.BANK_PATH
        bank = build_bank(args.body, args.distance)
        procedural.save_bank(out, bank)
        print(f"bank {bank.arrays['impact'].shape} valid for {bank.bodies}, written to {out}")
        return
    for option, (path, seed, southpaw) in HELDOUT.items():
        if getattr(args, option):
            out = args.out if args.out != punches.DEFAULT_PATH else path
            dist = procedural.Distribution(southpaw_share=southpaw)
            table = procedural.heldout_table(dist, seed, HELDOUT_SEQUENCES)
            procedural.save_table(out, table, seed)
            print(
                f"{len(table['kind'])} held-out punches in {len(table['starts'])} sequences, written to {out}"
            )
            return
    lib = build(args.body, args.distance, args.rate)
    punches.save(args.out, lib)
    print(f"{lib.size} punches, {lib.qpos.shape[1]} frames at {lib.rate_hz:g} Hz, valid for {lib.bodies}")
    for name, speed, dur in zip(lib.names, lib.peak_speed_mps, lib.duration_s(), strict=True):
        print(f"  {name:28s} peak glove speed {speed:4.1f} m/s, {dur:.2f} s")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
