"""Learning curves of training runs: one PNG, one panel per figure, the runs overlaid.

    boxjax bench plot_runs runs/A runs/B ... [--out curves.png]       (or python experiments/plot_runs.py)

Every training CLI also draws its own run's curves to runs/NAME/curves.png when it ends (`write_curves`).
Panels: episode return, falls (% of the episodes that ended, as the progress line prints them), the task's
progress (curriculum level, or blocks and punches, or walking error), seconds per iteration, and overflowing /
non-finite worlds; each y axis names its unit. A panel whose figures no run has is left out, and so is a
task figure that never moves in any run (a curriculum that stayed at its level, goals of episodes without
goals, no problem worlds): its flat line would say nothing. The x axis is environment steps.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from boxjax.runs import read_metrics


@dataclasses.dataclass(frozen=True)
class Panel:
    """One panel of the curves image."""

    title: str
    """Its title."""
    unit: str
    """Its y axis label: what the numbers count, in which unit."""
    keys: tuple[str, ...]
    """The figures drawn in it (metrics keys); a figure missing from every run leaves its line out."""
    percent: bool = False
    """The figures are shares (0 to 1), drawn as %."""
    flat_hidden: bool = False
    """A figure with one value over every run is left out (the panel too when none is left)."""


PANELS = (
    Panel("episode return", "return (rewards summed over an episode)", ("episode/return",)),
    Panel("falls", "% of the episodes that ended", ("episode/fall_rate",), percent=True),
    Panel("curriculum level", "level (0: the first)", ("curriculum/level",), flat_hidden=True),
    Panel(
        "events per iteration",
        "count per iteration",
        ("count/blocks", "count/punches", "count/goals"),
        flat_hidden=True,
    ),
    Panel(
        "punch outcomes",
        "% of the punches that arrived",
        ("share/blocked", "share/missed", "share/hit"),
        percent=True,
        flat_hidden=True,
    ),
    Panel(
        "self-play: reward per step",
        "mean reward per world-step",
        ("agent/blocker/reward", "agent/opponent/reward"),
    ),
    Panel(
        "walk error",
        "m/s (lin_error), rad/s (yaw_error)",
        ("env/walk/lin_error", "env/walk/yaw_error"),
        flat_hidden=True,
    ),
    Panel("s / iteration", "seconds (log scale)", ("s_per_iteration",)),
    Panel(
        "problem worlds",
        "count per iteration",
        ("overflow", "env/nonfinite_worlds", "guard/skipped_steps"),
        flat_hidden=True,
    ),
)
"""The panels, in drawing order."""
LOG_PANELS = ("s / iteration",)
"""Panels on a log scale: the first iteration (the compile) is orders of magnitude above the others."""
EPISODE_PREFIX = "episode/"
"""Figures of the episodes that ended in an iteration: 0 placeholders when none did (`episode/count` 0)."""


def figure_values(rows: list[dict], key: str) -> list[float]:
    """`key` of every row, NaN where a row lacks it, and for an episode figure (`EPISODE_PREFIX`) NaN where
    no episode ended in that iteration: its 0 there is no measurement (a line would dive to 0 and back)."""
    nan = float("nan")
    if not key.startswith(EPISODE_PREFIX):
        return [row.get(key, nan) for row in rows]
    return [row.get(key, nan) if row.get("episode/count", 1.0) > 0 else nan for row in rows]


OUTCOMES = ("blocked", "missed", "hit")
"""Punch outcomes drawn as shares of the punches that arrived (`share/<outcome>`)."""


def with_shares(rows: list[dict]) -> list[dict]:
    """`rows` with `share/<outcome>` added where a row counts arriving punches (`env/punch/arrived` > 0)."""
    out = []
    for row in rows:
        arrived = row.get("env/punch/arrived", 0.0)
        shares = {f"share/{k}": row[f"env/punch/{k}"] / arrived for k in OUTCOMES if arrived > 0}
        out.append({**row, **shares})
    return out


def smoothed(values: list[float], window: int) -> list[float]:
    """Trailing mean over `window` values (NaNs left out); `window` 1 leaves them as they are."""
    import numpy as np

    if window <= 1:
        return values
    v = np.asarray(values, float)
    out = []
    for i in range(len(v)):
        tail = v[max(0, i - window + 1) : i + 1]
        out.append(float(np.nanmean(tail)) if np.isfinite(tail).any() else float("nan"))
    return out


def panels_with_data(runs: dict[str, list[dict]]) -> list[tuple[Panel, tuple[str, ...]]]:
    """The `PANELS` that at least one run has a figure for, each with just those figures; in a
    `Panel.flat_hidden` panel only the figures that take more than one value over the runs."""
    kept = []
    for panel in PANELS:
        keys = tuple(k for k in panel.keys if _values(runs, k) and not (panel.flat_hidden and _flat(runs, k)))
        if keys:
            kept.append((panel, keys))
    return kept


def _values(runs: dict[str, list[dict]], key: str) -> list[float]:
    """Every finite value of `key` over the runs' rows (`figure_values`)."""
    return [v for rows in runs.values() for v in figure_values(rows, key) if not math.isnan(v)]


def _flat(runs: dict[str, list[dict]], key: str) -> bool:
    """Whether `key` takes one value over every run."""
    values = _values(runs, key)
    return max(values) == min(values)


def draw(runs: dict[str, list[dict]], out: str, x: str = "steps", smooth: int = 1) -> str:
    """Draw the runs' curves (`{label: metrics rows}`) into the PNG `out` against environment steps or
    iterations (`x`), each a trailing mean over `smooth` iterations; returns its path."""
    import matplotlib.pyplot as plt

    fig = figure(runs, x, smooth)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def figure(runs: dict[str, list[dict]], x: str = "steps", smooth: int = 1) -> Any:
    """The matplotlib figure `draw` saves: one axes per panel of `panels_with_data`, in order, then the
    unused cells switched off."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    runs = {label: with_shares(rows) for label, rows in runs.items()}
    panels = panels_with_data(runs)
    if not panels:
        raise ValueError("no figures to draw: the metrics rows hold none of the panels' figures")
    cols = 2
    rows_n = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(11, 3.0 * rows_n), squeeze=False)
    for ax, (panel, keys) in zip(axes.flat, panels, strict=False):
        for label, rows in runs.items():
            steps = [row.get("env_steps", row.get("iteration", i)) for i, row in enumerate(rows)]
            if x == "iterations":
                steps = [row.get("iteration", i + 1) for i, row in enumerate(rows)]
            for key in keys:
                values = smoothed(figure_values(rows, key), smooth)
                if panel.percent:
                    values = [100.0 * v for v in values]
                name = label if len(panel.keys) == 1 else f"{label}: {key.split('/')[-1]}"
                ax.plot(steps, values, label=name, linewidth=1.2)
        ax.set_title(panel.title)
        ax.set_ylabel(panel.unit, fontsize=8)
        if panel.title in LOG_PANELS:
            ax.set_yscale("log")
        ax.set_xlabel("environment steps" if x == "steps" else "iterations")
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 400k, not 400000 (they run into each other)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def write_curves(run: str) -> str:
    """Draw one run folder's metrics into run/curves.png; returns the path."""
    return draw({os.path.basename(os.path.normpath(run)): read_metrics(run)}, os.path.join(run, "curves.png"))
