"""Valid ranges of configuration fields, checked in one place with errors that name the field and the range.

A config dataclass lists a `Range` for each of its numeric fields (`check_fields`); a tuple field's range
applies to every element, and a `Range(..., pair=True)` field must also be a (low, high) with low <= high.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Range:
    """An interval of valid values, bounds included unless `open_low` / `open_high`; None is unbounded."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    integer: bool = False
    """Values must be ints (bools are not)."""
    pair: bool = False
    """The field is a (low, high) tuple with low <= high."""

    def contains(self, value: float) -> bool:
        """Whether `value` (a finite number) lies in the interval."""
        if self.low is not None and (value < self.low or (self.open_low and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.open_high and value == self.high)))

    def describe(self) -> str:
        """What a valid value is, e.g. "in [0, 1]", "in (0, inf)" or "an integer in [1, inf)"."""
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        left = "(" if self.open_low or self.low is None else "["
        right = ")" if self.open_high or self.high is None else "]"
        text = f"in {left}{low}, {high}{right}"
        return ("an integer " + text) if self.integer else text


ANY = Range()
POSITIVE = Range(0.0, open_low=True)
NON_NEGATIVE = Range(0.0)
UNIT = Range(0.0, 1.0)
COSINE = Range(-1.0, 1.0)
COUNT = Range(1, integer=True)
"""A positive whole number."""


def _number_problem(value: Any, valid: Range) -> str | None:
    """Why `value` is not a valid element of `valid`, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be {'' if valid.integer else 'a number '}{valid.describe()}, got {value!r}"
    if (
        (valid.integer and not isinstance(value, int))
        or not math.isfinite(value)
        or not valid.contains(value)
    ):
        return f"must be {valid.describe()}, got {value!r}"
    return None


def field_problem(value: Any, valid: Range) -> str | None:
    """Why a field's `value` (a number, or a tuple or list of numbers) breaks `valid`, or None."""
    values = tuple(value) if isinstance(value, tuple | list) else (value,)
    if valid.pair and (not isinstance(value, tuple | list) or len(value) != 2):
        return f"expected (low, high), got {value!r}"
    for v in values:
        problem = _number_problem(v, valid)
        if problem:
            return problem if len(values) == 1 else f"{problem} (in {value!r})"
    if valid.pair and value[0] > value[1]:
        return f"expected (low, high) with low <= high, got {value!r}"
    return None


def check_fields(config: Any, ranges: Mapping[str, Range]) -> None:
    """Raise ValueError naming the first field of `config` outside its range in `ranges`."""
    name = type(config).__name__
    for field, valid in ranges.items():
        problem = field_problem(getattr(config, field), valid)
        if problem:
            raise ValueError(f"{name}.{field} {problem}")


def numeric_fields(config_type: type) -> tuple[str, ...]:
    """The fields of a config dataclass whose default is a number or a non-empty tuple of numbers (those
    `check_fields` must cover; an empty tuple, like `BlockConfig.ablate`, holds names)."""

    def numeric(value: Any) -> bool:
        return not isinstance(value, bool) and isinstance(value, int | float)

    fields = dataclasses.fields(config_type)
    return tuple(
        f.name
        for f in fields
        if numeric(f.default) or (isinstance(f.default, tuple) and f.default and all(map(numeric, f.default)))
    )
