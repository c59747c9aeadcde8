"""Learning curves of training runs in one PNG, the runs overlaid (`boxjax.viz.curves` draws them):

boxjax bench plot_runs runs/A runs/B ... [--out curves.png] [--x iterations] [--smooth 10]
python experiments/plot_runs.py runs/A runs/B ...
"""

from __future__ import annotations

import os

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main
from boxjax.runs import read_metrics
from boxjax.viz import curves


def main(argv: list[str] | None = None) -> int:
    """Overlay the named runs' curves in one PNG."""
    p = bench_rows.parser(__doc__, "plot_runs")
    p.add_argument("runs", nargs="+", help="run folders (runs/NAME) holding metrics.jsonl")
    p.add_argument("--out", default="curves.png")
    p.add_argument("--x", choices=("steps", "iterations"), default="steps", help="the horizontal axis")
    p.add_argument("--smooth", type=int, default=1, help="trailing mean over this many iterations")
    p.add_argument("--iterations", type=int, default=None, help="only each run's first N iterations")
    bench_rows.add_common_args(p)
    args = p.parse_args(argv)
    runs = {os.path.basename(os.path.normpath(r)): read_metrics(r)[: args.iterations] for r in args.runs}
    print(f"curves of {len(runs)} run(s) written to {curves.draw(runs, args.out, args.x, args.smooth)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
