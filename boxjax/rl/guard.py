"""Finite or stop: the checks that keep a non-finite value out of the learner, and the host-side reports.

On the device (inside the fused iteration) each gradient step is applied only when its loss and gradients
are finite, an update whose resulting parameters or optimiser state are not is undone as a whole, and the
observation statistics only take in a finite result; what was skipped is counted in the iteration's
figures (`FIGURES`), read with the others (no extra host round-trip). On the host, `Guard` turns those
figures into a `NAN` line and, after too many consecutive skipped updates (or at the first non-finite
value with `stop_on_nan`), a `NonFiniteError` naming the first non-finite quantity and the iteration.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from boxjax.rl import rollout

PREFIX_ROOT = "guard/"
"""Every figure of the guard starts so."""
PREFIX = "guard/nonfinite/"
QUANTITIES = ("observations", "loss", "gradients", "parameters", "observation_statistics")
"""What is checked, in the order it is computed: the first one flagged is the one an error names."""
SKIPPED_STEPS = "guard/skipped_steps"
"""Figure: gradient steps of the iteration that were not applied."""
UPDATE_SKIPPED = "guard/update_skipped"
"""Figure: 1.0 when the iteration's update changed nothing (every gradient step skipped)."""
NONFINITE_WORLDS = "env/" + rollout.NONFINITE_WORLDS
"""Figure: world-steps whose state turned non-finite (each reset), as the host sees it."""


class NonFiniteError(RuntimeError):
    """Training produced non-finite values it could not skip past (or `stop_on_nan` was set)."""


def all_finite(tree: Any) -> jax.Array:
    """() bool: every floating-point leaf of `tree` is finite (True for a tree without any)."""
    checks = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree.leaves(tree)
        if jnp.issubdtype(jnp.result_type(x), jnp.inexact)
    ]
    return jnp.all(jnp.stack(checks)) if checks else jnp.ones((), bool)


def keep_if(ok: jax.Array, new: Any, old: Any) -> Any:
    """`new` where `ok` (a () bool), else `old`, leaf by leaf."""
    return jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)


def finite_or(new: Any, old: Any) -> tuple[Any, jax.Array]:
    """(`new` if every floating-point leaf is finite, else `old`; () bool whether it was)."""
    ok = all_finite(new)
    return keep_if(ok, new, old), ok


def masked_mean(tree: Any, mask: jax.Array) -> Any:
    """Mean of every leaf (steps, ...) over the steps where `mask` (steps,) is 1; 0 where none is."""
    count = jnp.maximum(jnp.sum(mask), 1.0)

    def mean(x: jax.Array) -> jax.Array:
        weights = mask.reshape(mask.shape + (1,) * (x.ndim - 1))
        return jnp.sum(jnp.where(weights > 0, x, 0.0), axis=0) / count

    return jax.tree.map(mean, tree)


def nonfinite_leaves(tree: Any) -> list[str]:
    """Paths of the floating-point leaves of a host-readable `tree` holding NaN or inf (host-side)."""
    bad = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        value = np.asarray(leaf)
        if np.issubdtype(value.dtype, np.inexact) and not np.all(np.isfinite(value)):
            bad.append(jax.tree_util.keystr(path, simple=True, separator="/"))
    return bad


def refuse_checkpoint(step: int, state: Any) -> bool:
    """Whether checkpoint `step` of the host-readable `state` must not be written: True (with a printed
    `CHECKPOINT ... not written` line) when any value is non-finite, so the newest checkpoint on disk is
    always the last good one."""
    bad = nonfinite_leaves(state)
    if bad:
        print(
            f"CHECKPOINT {step} not written: non-finite values in {', '.join(bad[:3])}"
            f"{' and more' if len(bad) > 3 else ''}; the newest checkpoint on disk is the last good one",
            flush=True,
        )
    return bool(bad)


def first_nonfinite(figures: dict[str, float]) -> str | None:
    """The first quantity (`QUANTITIES` order) an iteration's figures flag as non-finite, or None."""
    return next((q for q in QUANTITIES if figures.get(PREFIX + q, 0.0) > 0), None)


def report(figures: dict[str, float], total_steps: int) -> str | None:
    """A `NAN ...` line when the iteration reset non-finite worlds or skipped non-finite updates, or None."""
    worlds = int(figures.get(NONFINITE_WORLDS, 0.0))
    skipped = int(figures.get(SKIPPED_STEPS, 0.0))
    stats = figures.get(PREFIX + "observation_statistics", 0.0) > 0
    if not (worlds or skipped or stats):
        return None
    parts = []
    if worlds:
        parts.append(f"{worlds} non-finite world-steps reset (not counted as falls)")
    if skipped:
        parts.append(
            f"{skipped} of {total_steps} gradient steps skipped "
            f"(first non-finite: {first_nonfinite(figures)})"
        )
    if stats:
        parts.append("observation statistics kept from the iteration before")
    return f"NAN iteration {int(figures['iteration'])}: " + "; ".join(parts)


MAX_SKIPPED_SHARE = 0.5
"""A run stops when more than this share of its gradient steps was skipped over `SKIPPED_SHARE_WINDOW`
iterations in a row: an update that keeps skipping most of its steps learns from a biased few."""
SKIPPED_SHARE_WINDOW = 10
"""Iterations over which the skipped share is taken."""


@dataclasses.dataclass
class Guard:
    """The host's side of the guard over a run: counts consecutive skipped updates, iterations whose every
    world-step was non-finite and the share of skipped gradient steps, and says when to stop."""

    max_skipped_updates: int = 5
    """Consecutive iterations whose update was skipped, or whose every world-step was non-finite, after
    which the run stops."""
    stop_on_nan: bool = False
    """Stop at the first iteration with any non-finite world or skipped gradient step."""
    streak: int = 0
    """Consecutive skipped updates so far."""
    streak_start: tuple[int, str] | None = None
    """(iteration, first non-finite quantity) where the current streak began."""
    dead_streak: int = 0
    """Consecutive iterations whose every world-step was non-finite."""
    skipped_shares: list[float] = dataclasses.field(default_factory=list)
    """The share of gradient steps skipped in each of the last `SKIPPED_SHARE_WINDOW` iterations."""

    def __post_init__(self) -> None:
        """Reject a count that could never stop a run."""
        if self.max_skipped_updates < 1:
            raise ValueError(f"max_skipped_updates must be an integer >= 1, got {self.max_skipped_updates}")

    def check(
        self, figures: dict[str, float], total_steps: int, world_steps: int
    ) -> tuple[str | None, NonFiniteError | None]:
        """(the iteration's `NAN` line or None, the error to stop with or None), from its figures, the
        gradient steps of an update (`total_steps`) and the world-steps of an iteration (`world_steps`)."""
        line = report(figures, total_steps)
        checks = (
            self._skipped_streak(figures),
            self._dead_env(figures, world_steps),
            self._skipped_share(figures, total_steps),
        )  # each counts this iteration, whichever stops the run
        error = next((e for e in checks if e is not None), None)
        if error is None and line and self.stop_on_nan:
            error = NonFiniteError(f"stopped on a non-finite value (stop_on_nan): {line}")
        return line, error

    def _dead_env(self, figures: dict[str, float], world_steps: int) -> NonFiniteError | None:
        """The error once every world-step was non-finite for `max_skipped_updates` iterations in a row."""
        dead = figures.get(NONFINITE_WORLDS, 0.0) >= world_steps
        self.dead_streak = self.dead_streak + 1 if dead else 0
        if self.dead_streak < self.max_skipped_updates:
            return None
        return NonFiniteError(
            f"the environment's state was non-finite in every world at every step for {self.dead_streak} "
            f"iterations in a row (to iteration {int(figures['iteration'])}): each world is reset and "
            "training learns nothing; the environment is broken"
        )

    def _skipped_share(self, figures: dict[str, float], total_steps: int) -> NonFiniteError | None:
        """The error once more than `MAX_SKIPPED_SHARE` of the gradient steps were skipped over the last
        `SKIPPED_SHARE_WINDOW` iterations."""
        self.skipped_shares = [*self.skipped_shares, figures.get(SKIPPED_STEPS, 0.0) / total_steps]
        self.skipped_shares = self.skipped_shares[-SKIPPED_SHARE_WINDOW:]
        share = sum(self.skipped_shares) / SKIPPED_SHARE_WINDOW
        if len(self.skipped_shares) < SKIPPED_SHARE_WINDOW or share <= MAX_SKIPPED_SHARE:
            return None
        return NonFiniteError(
            f"{100 * share:.0f} % of the gradient steps of the last {SKIPPED_SHARE_WINDOW} iterations (to "
            f"iteration {int(figures['iteration'])}) were skipped as non-finite, more than "
            f"{100 * MAX_SKIPPED_SHARE:.0f} %; first non-finite quantity now: {first_nonfinite(figures)}"
        )

    def _skipped_streak(self, figures: dict[str, float]) -> NonFiniteError | None:
        """The error once `max_skipped_updates` updates in a row were skipped."""
        iteration = int(figures["iteration"])
        if figures.get(UPDATE_SKIPPED, 0.0) > 0:
            self.streak += 1
            if self.streak_start is None:
                self.streak_start = (iteration, first_nonfinite(figures) or "unknown")
        else:
            self.streak, self.streak_start = 0, None
        if self.streak < self.max_skipped_updates:
            return None
        first_iteration, quantity = self.streak_start
        return NonFiniteError(
            f"{self.streak} consecutive updates skipped as non-finite (iterations {first_iteration}-"
            f"{iteration}); the first non-finite quantity was the {quantity.replace('_', ' ')} at "
            f"iteration {first_iteration}"
        )
