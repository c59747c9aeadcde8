"""The seed's training-alike check as curves against iterations: a band of reference runs (the GPU path's
runs, min to max at each iteration) and the runs compared with it, in four panels: the return and the falls
of the episodes that ended (weighted by episodes), and the blocked and hit shares of the punches that
arrived, each over a trailing window of iterations.

    boxjax bench plot_alike --band results/logs/a.jsonl.gz results/logs/b.jsonl.gz \\
        --run "CPU path=results/logs/c.jsonl.gz" --iterations 320 --out docs/block-alike.png
"""

from __future__ import annotations

import numpy as np

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main
from boxjax.runs import read_metrics

PANELS = (
    ("return", "return of the episodes ended"),
    ("falls", "falls (share of episodes ended)"),
    ("blocked", "blocked (share of punches arrived)"),
    ("hit", "hit (share of punches arrived)"),
)
"""(curve, title) of each panel."""


def _trailing_sum(values: np.ndarray, window: int) -> np.ndarray:
    """Sum of the last `window` entries at each index (fewer at the start)."""
    total = np.cumsum(values)
    out = total.copy()
    out[window:] -= total[:-window]
    return out


def trailing_curves(rows: list[dict], window: int) -> dict[str, np.ndarray]:
    """{curve: (iterations,) values} of `PANELS` over the trailing `window` iterations: return and falls
    weighted by the episodes each iteration ended, shares of the punches arrived in the window (NaN where
    the window has no episode or no punch)."""

    def column(key: str) -> np.ndarray:
        return np.array([float(r.get(key, 0.0)) for r in rows])

    episodes = _trailing_sum(column("episode/count"), window)
    arrived = _trailing_sum(column("env/punch/arrived"), window)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            name: _trailing_sum(column(key) * column("episode/count"), window) / episodes
            for name, key in (("return", "episode/return"), ("falls", "episode/fall_rate"))
        }
        out.update(
            {
                name: _trailing_sum(column(f"env/punch/{name}"), window) / arrived
                for name in ("blocked", "hit")
            }
        )
    return {name: np.where(np.isfinite(v), v, np.nan) for name, v in out.items()}


def named(spec: str) -> tuple[str, str]:
    """("NAME", "PATH") of a "NAME=PATH" argument (a bare PATH is named by itself)."""
    name, sep, path = spec.partition("=")
    return (name, path) if sep else (spec, spec)


def draw(
    band: list[list[dict]], band_name: str, compared: dict[str, list[dict]], window: int, out: str
) -> str:
    """Writes the four panels to `out` (PNG); returns it."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    band_curves = [trailing_curves(rows, window) for rows in band]
    length = min(len(rows) for rows in band) if band else 0
    for ax, (name, title) in zip(axes.ravel(), PANELS, strict=True):
        if band_curves:
            stack = np.stack([c[name][:length] for c in band_curves])
            with warnings.catch_warnings():  # iterations where no band run ended an episode: a gap
                warnings.simplefilter("ignore", RuntimeWarning)
                low, high = np.nanmin(stack, 0), np.nanmax(stack, 0)
            ax.fill_between(np.arange(1, length + 1), low, high, alpha=0.3, label=band_name)
        for label, rows in compared.items():
            ax.plot(np.arange(1, len(rows) + 1), trailing_curves(rows, window)[name], label=label, lw=1.2)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("iteration")
    axes[0, 1].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"training alike: trailing {window} iterations", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    """Draw the band and the compared runs."""
    p = bench_rows.parser(__doc__, "plot_alike")
    p.add_argument("--band", nargs="+", default=[], help="reference runs (folders or metrics files)")
    p.add_argument("--band-name", default="GPU runs (min to max)")
    p.add_argument("--run", action="append", default=[], help="NAME=PATH of a run compared with the band")
    p.add_argument("--iterations", type=int, default=None, help="only each run's first N iterations")
    p.add_argument("--window", type=int, default=20, help="trailing iterations of each point")
    p.add_argument("--out", default="alike.png")
    bench_rows.add_common_args(p)
    args = p.parse_args(argv)
    if not args.band and not args.run:
        p.error("name runs: --band PATH ... and/or --run NAME=PATH")
    if args.window < 1:
        p.error("--window must be at least 1")
    band = [read_metrics(path)[: args.iterations] for path in args.band]
    compared = {name: read_metrics(path)[: args.iterations] for name, path in map(named, args.run)}
    print(f"written to {draw(band, args.band_name, compared, args.window, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
