"""Where a blocking iteration's time goes: a PNG from `bench_block.py`'s rows.

    python experiments/plot_block.py results/bench/block-*.jsonl --out docs/block-iteration.png

One horizontal stacked bar per measured shape (device, body, worlds x steps, convex-collision cap): physics,
vision, scoring, IK, teacher, the rest of the rollout, and the PPO update, in seconds per iteration, from the
newest bench run (rows of one date) that split it; runs timed with `--iteration-only`, which have no split,
are left out. The seed's reported RTX 5090 iteration (1.09 s env, 0.08 s update, 1.19 s in all) is drawn
for comparison.
Needs matplotlib (`pip install matplotlib`).
"""

from __future__ import annotations

import json

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

PARTS = ("physics", "vision", "scoring", "ik", "teacher", "other", "update")
COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3")
SEED = ("seed, RTX 5090 (reported; env step not split)", {"other": 1.09, "update": 0.08}, 1.19)
"""The seed's blocking iteration as reported: env step 1.09 s (drawn as 'other'), update 0.08 s, 1.19 s in
all (the report leaves 0.02 s unaccounted)."""


MUJOCO_CCD_ITERATIONS = 35
"""MuJoCo's default cap on convex-collision iterations: the models' own before `boxer.CCD_ITERATIONS`
(rows from before the 2026-12-02 change name no `ccd_iterations`)."""


def load(paths: list[str]) -> dict[tuple, dict[str, float]]:
    """{(device, body, worlds, unroll, teacher, ccd_iterations): {metric: value}} of the newest run (rows of
    one date) that split each shape's iteration, from rows of the stock physics call (MJX's graph mode, one
    call per substep; rows of another graph mode, substep calls or MuJoCo option but the convex-collision cap
    are left out)."""
    runs: dict[tuple, dict[str, dict[str, float]]] = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                if row.get("bench") != "block" or "unroll" not in row or not _stock_call(row):
                    continue
                key = (row["device"], row["body"], row["worlds"], row["unroll"], row.get("teacher", "none"))
                run = runs.setdefault((*key, ccd_iterations(row)), {}).setdefault(row.get("date", ""), {})
                run[row["metric"]] = row["value"]
    shapes = {}
    for key, by_date in runs.items():
        split = [date for date, m in by_date.items() if "s_per_iteration" in m and "it_physics_s" in m]
        if split:
            shapes[key] = by_date[max(split)]
    return shapes


def ccd_iterations(row: dict) -> int:
    """The convex-collision cap a bench row's model ran with."""
    given = row.get("mj_options") or {}
    return row.get("ccd_iterations", given.get("ccd_iterations", MUJOCO_CCD_ITERATIONS))


def _stock_call(row: dict) -> bool:
    """Whether a bench row ran MJX's graph mode, one call per substep and no MuJoCo option of its own but
    the convex-collision cap."""
    return (
        row.get("graph_mode", "default") == "default"
        and row.get("substep_calls", "each") == "each"
        and set(row.get("mj_options") or {}) <= {"ccd_iterations"}
    )


def plot(shapes: dict[tuple, dict[str, float]], out: str) -> None:
    """Draw the bars (ours, then the seed's) into `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [
        (
            f"{device}, {body}, {worlds} x {unroll}, teacher {teacher}, GJK cap {ccd}",
            {p: max(m.get(f"it_{p}_s", 0.0), 0.0) for p in PARTS},
            m["s_per_iteration"],
        )
        for (device, body, worlds, unroll, teacher, ccd), m in sorted(shapes.items())
    ]
    bars.append(SEED)
    fig, ax = plt.subplots(figsize=(10, 1.6 + 0.6 * len(bars)))
    for row, (_, parts, total_s) in enumerate(bars):
        left = 0.0
        for part, colour in zip(PARTS, COLOURS, strict=True):
            width = parts.get(part, 0.0)
            ax.barh(row, width, left=left, color=colour, label=part if row == 0 else None)
            left += width
        ax.text(left + 0.01, row, f"{total_s:.3f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(bars)), [label for label, _, _ in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per PPO iteration (collect + update)")
    ax.set_title("Blocking iteration: where the time goes")
    ax.legend(ncol=len(PARTS), fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.35 - 0.05 * len(bars)))
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, draw."""
    p = bench_rows.parser(__doc__, "plot_block")
    p.add_argument("rows", nargs="+", help="bench_block.py JSON Lines files")
    p.add_argument("--out", default="docs/block-iteration.png")
    bench_rows.add_common_args(p)
    args = p.parse_args(argv)
    shapes = load(args.rows)
    if not shapes:
        files = ", ".join(args.rows)
        raise SystemExit(f"no block iteration rows (bench_block.py without --no-iteration) in {files}")
    plot(shapes, args.out)
    print(f"wrote {args.out} ({len(shapes)} measured shapes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
