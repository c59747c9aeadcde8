"""What `boxjax eval` prints and writes: the defence's tables (Markdown), its rows (JSON Lines under
results/eval/, as the benchmarks' under results/bench/) and its charts (matplotlib, Agg)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from itertools import product

import numpy as np

from boxjax.bench.defence.tally import HISTOGRAM_BINS, Defence, KindFigures, Share
from boxjax.envs.block.punches import KINDS, TARGETS

SHARES = ("blocked", "parried", "blocked_low_score", "missed", "hit", "clean")
"""The `Defence` shares of arrived punches, in table order."""
LABELS = {
    "blocked": "blocked",
    "parried": "  parried (touched the guard)",
    "blocked_low_score": "  reached, scored too little",
    "missed": "missed",
    "hit": "hit",
    "clean": "  clean",
}
OUTCOME_COLOURS = {"blocked": "tab:green", "missed": "tab:grey", "hit": "tab:red"}


def percent(share: Share) -> str:
    """ "38.88 % (36.23-41.61)", or "-" of no trials."""
    if share.share is None:
        return "-"
    return f"{100 * share.share:.2f} % ({100 * share.low:.2f}-{100 * share.high:.2f})"


def defence_table(d: Defence) -> str:
    """The headline figures of one punch set as a Markdown table."""
    lines = ["| of arrived punches | count | share (95 %) |", "|---|---|---|"]
    lines += [f"| {LABELS[k]} | {getattr(d, k).count} | {percent(getattr(d, k))} |" for k in SHARES]
    mean = "-" if d.hit_score_mean is None else f"{d.hit_score_mean:.4f}"
    per = "-" if d.score_per_arrived is None else f"{d.score_per_arrived:.4f}"
    bins = " ".join(str(n) for n in d.histogram)
    return "\n".join(
        [
            f"thrown {d.thrown}, arrived {d.arrived}; falls {d.falls} / {d.episodes} episodes"
            + (f"; {d.nonfinite} non-finite world-steps" if d.nonfinite else ""),
            *lines,
            f"hit score: mean {mean} over hits, {per} per arrived punch; hits by score in "
            f"{HISTOGRAM_BINS} bins on [0, 1]: {bins}",
        ]
    )


def tag_table(d: Defence) -> str:
    """Arrived, blocked, missed and hit per punch kind, target and speed label (Markdown)."""
    lines = ["| tag | value | arrived | blocked | missed | hit (95 %) |", "|---|---|---|---|---|---|"]
    for t in d.by_tag:
        blocked, missed = (
            f"{100 * s.share:.1f} %" if s.share is not None else "-" for s in (t.blocked, t.missed)
        )
        lines.append(f"| {t.tag} | {t.value} | {t.arrived} | {blocked} | {missed} | {percent(t.hit)} |")
    return "\n".join(lines)


def kinds_table(figures: Sequence[KindFigures]) -> str:
    """The other episode kinds' success rates (Markdown)."""
    lines = ["| kind | success | count / trials | rate (95 %) | falls / episodes |", "|---|---|---|---|---|"]
    for k in figures:
        rate = "-" if k.rate is None else f"{k.rate:.3f}"
        if k.interval is not None and k.rate is not None:
            rate = f"{100 * k.rate:.1f} % ({100 * k.interval[0]:.1f}-{100 * k.interval[1]:.1f})"
        trials = f"{k.trials} {'episodes' if k.per == 'episode' else 'commands'}"
        lines.append(f"| {k.kind} | {k.success} | {k.count} / {trials} | {rate} | {k.falls} / {k.episodes} |")
    return "\n".join(lines)


def crossplay_table(
    cells: dict[tuple[str, str], Defence], blockers: Sequence[str], opponents: Sequence[str]
) -> str:
    """Markdown: one row per blocker version, one column per opponent version, each cell the hit share of
    the punches that arrived (95 % interval) and how many arrived."""
    lines = ["| blocker \\ opponent | " + " | ".join(opponents) + " |", "|---" * (len(opponents) + 1) + "|"]
    for b in blockers:
        row = [f"{percent(cells[b, o].hit)} of {cells[b, o].arrived}" for o in opponents]
        lines.append(f"| {b} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def defence_row(d: Defence) -> dict:
    """The figures of `d` as a row's fields (shares as {count, total, share, low, high})."""
    row = dataclasses.asdict(d)
    row["falls_per_episode"] = d.falls / d.episodes if d.episodes else None
    return row


def append_rows(path: str, rows: Sequence[dict]) -> None:
    """Append `rows` to the JSON Lines file `path`."""
    with open(path, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def outcome_chart(path: str, panels: Sequence[tuple[str, Defence]], title: str) -> None:
    """Stacked blocked / missed / hit shares of the arrived punches per kind and target (their count under
    each bar), one panel per punch set (`panels`: (its name, its figures)), written as a PNG."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.2 * len(panels)), squeeze=False)
    for ax, (name, d) in zip(axes[:, 0], panels, strict=True):
        counts = {(c["kind"], c["target"]): np.zeros(4) for c in d.cells}
        for c in d.cells:
            counts[c["kind"], c["target"]] += [c["arrived"], c["blocked"], c["missed"], c["hit"]]
        table = np.array([counts.get((k, t), np.zeros(4)) for k in KINDS for t in TARGETS])
        shares = table[:, 1:] / np.maximum(table[:, :1], 1)
        names = [f"{k}\n{t}\n{n:.0f}" for (k, t), n in zip(product(KINDS, TARGETS), table[:, 0], strict=True)]
        bottom = np.zeros(len(names))
        for i, outcome in enumerate(OUTCOME_COLOURS):
            ax.bar(names, shares[:, i], bottom=bottom, color=OUTCOME_COLOURS[outcome], label=outcome)
            bottom += shares[:, i]
        ax.set_ylim(0, 1)
        ax.set_ylabel("share of arrived")
        ax.set_title(f"{name}: {d.arrived} arrived, hit {percent(d.hit)}", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def skill_chart(path: str, curves: dict[str, list[dict]], title: str) -> None:
    """Hit share with its interval (top) and falls per episode (bottom) against iterations and against
    training minutes, one line per punch set (`curves`: its name -> rows with iteration, train_minutes,
    hit {share, low, high}, falls and episodes), as a PNG."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 6), sharex="col")
    for name, rows in curves.items():
        hit = np.array([[r["hit"]["share"] or 0.0, r["hit"]["low"], r["hit"]["high"]] for r in rows])
        errors = np.abs(hit[:, 1:].T - hit[:, 0])
        falls = [r["falls"] / max(r["episodes"], 1) for r in rows]
        for col, x in enumerate(("iteration", "train_minutes")):
            xs = [np.nan if r[x] is None else r[x] for r in rows]
            axes[0, col].errorbar(xs, hit[:, 0], yerr=errors, marker="o", capsize=3, label=name)
            axes[1, col].plot(xs, falls, marker="o", label=name)
    axes[1, 0].set_xlabel("iteration (checkpoint step)")
    axes[1, 1].set_xlabel("training minutes (sum of the iterations' wall time)")
    axes[0, 0].set_ylabel("hit share of arrived punches")
    axes[1, 0].set_ylabel("falls per face episode")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
