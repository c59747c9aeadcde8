"""Counting a rollout's punches, episodes and task successes (`Tally`, on the device, one step at a time) and
turning the counts into shares with 95 % Wilson intervals (`Defence`, `KindFigures`, on the host).

The counts are the block task's own per-step figures (`boxjax.envs.block.punch.punch_events`, the task's
`success/*`), summed over worlds and steps: a share is of punches that arrived, treated as independent
trials. Each arriving punch is also counted in its cell of kind x target x speed (`punches.TAGS`, the tags
`BlockEnv.punch_tags` gives on the state the step reached), so every per-tag figure is a sum of cells.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from boxjax.envs.block.punches import TAGS

PUNCH_EVENTS = (
    "punch/thrown", "punch/arrived", "punch/blocked", "punch/parried", "punch/missed", "punch/hit",
    "punch/clean", "punch/hit_score",
)  # fmt: skip
"""The task's per-step punch figures summed into `Tally.events` (0/1 flags, the last a hit's score)."""
OUTCOMES = ("arrived", "blocked", "missed", "hit")
"""What each cell of `Tally.cells` counts (blocked + missed + hit = arrived)."""
KIND_FIGURES = {
    "command": ("success/commands_held", "command/presses"),
    "walk": ("success/goals", None),
    "bag": ("success/bag_hits", None),
    "shove": ("success/recoveries", None),
}
"""The other episode kinds' success figure and what it is counted per: None, per episode; a figure, per
command: the episode's first (fitted at reset) and each press after it (the figure counts those)."""
TASK_FIGURES = tuple(sorted({name for pair in KIND_FIGURES.values() for name in pair if name}))
"""The per-step figures summed over each finished episode (`Tally.finished`)."""
HISTOGRAM_BINS = 10
"""Bins of the hit scores' histogram on [0, 1]."""
Z95 = 1.959963984540054
"""The standard normal's 97.5 % quantile: two-sided 95 % intervals."""


@struct.dataclass
class Tally:
    """Totals of a rollout so far (float32 counts, exact up to 2**24)."""

    events: jax.Array
    """(len(PUNCH_EVENTS),) the punch figures summed over worlds and steps."""
    cells: jax.Array
    """(kinds + 1, targets + 1, speeds + 1, len(OUTCOMES)) arriving punches by tags (`TAGS`; the last index
    of each tag: a label outside its names) and outcome."""
    histogram: jax.Array
    """(HISTOGRAM_BINS,) hits by score."""
    episodes: jax.Array
    """() episodes that ended (a fall or the time limit; not those cut short by a non-finite state)."""
    falls: jax.Array
    """() episodes that ended by a fall (termination, not the time limit)."""
    nonfinite: jax.Array
    """() world-steps whose state turned non-finite (each ended its episode, counted in neither above)."""
    running: jax.Array
    """(worlds, len(TASK_FIGURES)) the task figures of each world's episode so far."""
    finished: jax.Array
    """(len(TASK_FIGURES),) the task figures of the episodes that ended."""

    @classmethod
    def zeros(cls, worlds: int) -> Tally:
        """Nothing counted yet, for `worlds` worlds."""
        shape = tuple(len(names) + 1 for names in TAGS.values()) + (len(OUTCOMES),)
        zero = jnp.zeros((), jnp.float32)
        return cls(
            events=jnp.zeros((len(PUNCH_EVENTS),), jnp.float32),
            cells=jnp.zeros(shape, jnp.float32),
            histogram=jnp.zeros((HISTOGRAM_BINS,), jnp.float32),
            episodes=zero,
            falls=zero,
            nonfinite=zero,
            running=jnp.zeros((worlds, len(TASK_FIGURES)), jnp.float32),
            finished=jnp.zeros((len(TASK_FIGURES),), jnp.float32),
        )


def add(tally: Tally, metrics: dict, tags: dict, done: jax.Array, truncation: jax.Array) -> Tally:
    """`tally` with one step of N worlds added: their per-step `metrics` ((N,) each, of the state each
    world reached, before any restart), the current punch's `tags` ((N,) int32 `TAGS` indices, of that
    state), whether the episode ended (`done`, (N,) 1.0) and whether by the time limit or a non-finite
    state (`truncation`)."""

    def f32(name: str) -> jax.Array:
        return jnp.asarray(metrics[name], jnp.float32)

    outcome = jnp.stack([f32(f"punch/{k}") for k in OUTCOMES], axis=-1)
    one_hots = [_one_hot(tags[name], len(names)) for name, names in TAGS.items()]
    cells = jnp.einsum("nk,nt,ns,no->ktso", *one_hots, outcome)
    score_bin = jnp.clip(jnp.floor(f32("punch/hit_score") * HISTOGRAM_BINS), 0, HISTOGRAM_BINS - 1)
    hits = jax.nn.one_hot(score_bin.astype(jnp.int32), HISTOGRAM_BINS) * f32("punch/hit")[:, None]
    bad = f32("nan")
    done = jnp.asarray(done, jnp.float32)
    ended = done * (1.0 - bad)
    running = tally.running + jnp.stack([f32(k) for k in TASK_FIGURES], axis=-1)
    return Tally(
        events=tally.events + jnp.stack([jnp.sum(f32(k)) for k in PUNCH_EVENTS]),
        cells=tally.cells + cells,
        histogram=tally.histogram + jnp.sum(hits, axis=0),
        episodes=tally.episodes + jnp.sum(ended),
        falls=tally.falls + jnp.sum(done * (1.0 - jnp.asarray(truncation, jnp.float32))),
        nonfinite=tally.nonfinite + jnp.sum(bad),
        running=running * (1.0 - done)[:, None],
        finished=tally.finished + jnp.sum(running * ended[:, None], axis=0),
    )


def _one_hot(index: jax.Array, size: int) -> jax.Array:
    """(N,) indices into `size` names -> (N, size + 1) one-hot, an index outside them in the last column."""
    index = jnp.asarray(index, jnp.int32)
    return jax.nn.one_hot(jnp.where((index >= 0) & (index < size), index, size), size + 1)


# -- on the host: shares and intervals ---------------------------------------------------------------------
def wilson(count: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval (low, high) of a share `count` / `total` at the normal quantile `z` (95 %
    two-sided by default); (0, 1) when `total` is 0."""
    if total <= 0:
        return 0.0, 1.0
    if not 0 <= count <= total:
        raise ValueError(f"a share of {count} successes in {total} trials")
    p, n = count / total, float(total)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclasses.dataclass(frozen=True)
class Share:
    """`count` of `total` trials, the share (None of no trials) and its 95 % Wilson interval."""

    count: int
    total: int
    share: float | None
    low: float
    high: float

    @classmethod
    def of(cls, count: float, total: float) -> Share:
        """The share `count` / `total` (whole numbers) with its interval."""
        count, total = int(round(count)), int(round(total))
        return cls(count, total, count / total if total else None, *wilson(count, total))


@dataclasses.dataclass(frozen=True)
class TagFigures:
    """The punches of one tag value (e.g. kind "jab") that arrived, by outcome."""

    tag: str
    value: str
    arrived: int
    blocked: Share
    missed: Share
    hit: Share


@dataclasses.dataclass(frozen=True)
class Defence:
    """What a rollout's face episodes measured of the defence (`defence`)."""

    thrown: int
    arrived: int
    blocked: Share
    """Of arrived punches: stopped by the guard (parried) or reached scoring too little to land."""
    parried: Share
    """Blocked with a touch of our gloves or forearms on the glove's way."""
    blocked_low_score: Share
    """Blocked without a touch: reached, scoring at most the task's `block_max_score`."""
    missed: Share
    hit: Share
    clean: Share
    """Hits scoring the task's `clean_hit_score` or more."""
    hit_score_mean: float | None
    """The mean score of the hits."""
    score_per_arrived: float | None
    """The hits' scores summed over every arrived punch (a block or a miss scoring 0)."""
    histogram: tuple[int, ...]
    """Hits by score, `HISTOGRAM_BINS` bins on [0, 1]."""
    episodes: int
    falls: int
    nonfinite: int
    by_tag: tuple[TagFigures, ...]
    """Per kind, target and speed label (`TAGS` order; "other" for a label outside them)."""
    cells: tuple[dict, ...]
    """Every kind x target x speed cell with punches that arrived: tags and `OUTCOMES` counts."""


def defence(tally: Tally) -> Defence:
    """The figures of a rollout's `tally` (numpy or device arrays)."""
    t = jax.tree.map(np.asarray, tally)
    e = dict(zip(PUNCH_EVENTS, t.events.tolist(), strict=True))
    arrived, hits = e["punch/arrived"], e["punch/hit"]
    return Defence(
        thrown=int(round(e["punch/thrown"])),
        arrived=int(round(arrived)),
        blocked=Share.of(e["punch/blocked"], arrived),
        parried=Share.of(e["punch/parried"], arrived),
        blocked_low_score=Share.of(e["punch/blocked"] - e["punch/parried"], arrived),
        missed=Share.of(e["punch/missed"], arrived),
        hit=Share.of(hits, arrived),
        clean=Share.of(e["punch/clean"], arrived),
        hit_score_mean=e["punch/hit_score"] / hits if hits else None,
        score_per_arrived=e["punch/hit_score"] / arrived if arrived else None,
        histogram=tuple(int(round(x)) for x in t.histogram.tolist()),
        episodes=int(round(float(t.episodes))),
        falls=int(round(float(t.falls))),
        nonfinite=int(round(float(t.nonfinite))),
        by_tag=tag_figures(t.cells),
        cells=cell_rows(t.cells),
    )


def tag_names(tag: str) -> tuple[str, ...]:
    """The names of a tag's indices in `Tally.cells`: `TAGS[tag]`, then "other"."""
    return (*TAGS[tag], "other")


def tag_figures(cells: np.ndarray) -> tuple[TagFigures, ...]:
    """Per tag value (each tag's cells summed over the other tags), those with punches that arrived."""
    out = []
    for axis, tag in enumerate(TAGS):
        others = tuple(a for a in range(len(TAGS)) if a != axis)
        for value, (arrived, blocked, missed, hit) in zip(
            tag_names(tag), cells.sum(axis=others), strict=True
        ):
            if arrived > 0 or value != "other":
                shares = (Share.of(x, arrived) for x in (blocked, missed, hit))
                out.append(TagFigures(tag, value, int(round(arrived)), *shares))
    return tuple(out)


def cell_rows(cells: np.ndarray) -> tuple[dict, ...]:
    """{kind, target, speed, arrived, blocked, missed, hit} of every cell with punches that arrived."""
    rows = []
    for index in zip(*np.nonzero(cells[..., 0]), strict=True):
        tags = {tag: tag_names(tag)[i] for tag, i in zip(TAGS, index, strict=True)}
        rows.append({**tags, **{k: int(round(v)) for k, v in zip(OUTCOMES, cells[index], strict=True)}})
    return tuple(rows)


@dataclasses.dataclass(frozen=True)
class KindFigures:
    """What a rollout of one other episode kind measured: its success per episode (or per press)."""

    kind: str
    success: str
    """The task figure counted (`KIND_FIGURES`)."""
    per: str
    """What it is counted per: "episode", or the figure of the count (the command's presses)."""
    count: int
    """Successes in the episodes that ended."""
    trials: int
    """Episodes that ended, or their commands (the first and the presses after it)."""
    rate: float | None
    """Successes per trial."""
    interval: tuple[float, float] | None
    """The rate's 95 % Wilson interval where a trial succeeds at most once (not the bag's hits)."""
    episodes: int
    falls: int
    nonfinite: int


def kind_figures(kind: str, tally: Tally) -> KindFigures:
    """The figures of a rollout of `kind` episodes only (one of `KIND_FIGURES`)."""
    t = jax.tree.map(np.asarray, tally)
    finished = dict(zip(TASK_FIGURES, t.finished.tolist(), strict=True))
    success, per = KIND_FIGURES[kind]
    episodes = int(round(float(t.episodes)))
    count = int(round(finished[success]))
    trials = episodes + (int(round(finished[per])) if per else 0)
    once = kind != "bag"
    return KindFigures(
        kind=kind, success=success, per=per or "episode", count=count, trials=trials,
        rate=count / trials if trials else None, interval=wilson(count, trials) if once else None,
        episodes=episodes, falls=int(round(float(t.falls))), nonfinite=int(round(float(t.nonfinite))),
    )  # fmt: skip
