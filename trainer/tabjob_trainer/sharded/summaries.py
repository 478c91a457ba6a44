"""What the ranks exchange instead of rows: small summaries of their shards, each mergeable (pure).

- Category counts per column, as a ``Counter`` of keys (the same strings the one-process encoder compares:
  ``preprocess._key``). A shard sends at most ``SENT_PER_SHARD`` of its most frequent keys per column: the merged
  top ``preprocess._MAX_CATEGORIES`` are exact unless a key outside every shard's top 10x the cap would make the
  global top (a long tail spread evenly over many shards). Ties in the merged counts go to the smaller key, so every
  rank encodes alike.
- The label: its type, its distinct values (up to ``MAX_CLASSES``), how many there are, whether all are whole
  numbers: enough to infer the problem type as ``problem.infer_problem_type`` does on the whole column.
- Numeric moments (count, sum, min, max; then the central moments around the merged mean) and quantile sketches
  (``QUANTILE_POINTS`` evenly spaced quantiles of each shard): the networks' input statistics and TabM's bins. The
  merged quantiles are those of the mixture of the shards' CDFs, each linear between its quantile points and a jump at
  a tie: a merged quantile's rank is off by at most 1/(QUANTILE_POINTS - 1) of the rows plus a row per shard (each
  interpolates between two of its values, as numpy's quantiles do).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tabjob_trainer.errors import DataError
from tabjob_trainer.preprocess import _MAX_CATEGORIES
from tabjob_trainer.problem import _MAX_CLASSES_FOR_INT, LabelInfo, ProblemType

SENT_PER_SHARD = 10 * _MAX_CATEGORIES
MAX_CLASSES = 10_000  # distinct label values kept; beyond, a label is regression or refused
QUANTILE_POINTS = 1001


def top(counts: Counter[str], limit: int) -> list[str]:
    """The ``limit`` most frequent keys, ties to the smaller key (the same order on every rank)."""
    return [k for k, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


def shard_counts(counts: Counter[str]) -> Counter[str]:
    """What one shard sends of its category counts."""
    return Counter(dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:SENT_PER_SHARD]))


def merge_counts(parts: Sequence[Counter[str]]) -> Counter[str]:
    total: Counter[str] = Counter()
    for part in parts:
        total.update(part)
    return total


@dataclass
class LabelSummary:
    numeric: bool  # an integer or floating column (booleans are classes, as in the one-process reader)
    count: int = 0  # rows with a label
    values: set[Any] = field(default_factory=set)  # distinct values, Python scalars, up to MAX_CLASSES
    overflow: bool = False  # more distinct values than MAX_CLASSES
    whole: bool = True  # every value a whole number (numeric labels)

    def add(self, values: Sequence[Any], whole: bool) -> None:
        self.count += len(values)
        self.whole = self.whole and whole
        if not self.overflow:
            self.values.update(values)
            if len(self.values) > MAX_CLASSES:
                self.overflow, self.values = True, set()


def merge_labels(parts: Sequence[LabelSummary]) -> LabelSummary:
    merged = LabelSummary(numeric=parts[0].numeric)
    for part in parts:
        merged.count += part.count
        merged.whole = merged.whole and part.whole
        merged.overflow = merged.overflow or part.overflow
        if not merged.overflow:
            merged.values.update(part.values)
            if len(merged.values) > MAX_CLASSES:
                merged.overflow, merged.values = True, set()
    return merged


def _sorted_classes(values: set[Any]) -> list[Any]:
    return sorted(values, key=lambda v: (str(type(v)), v))


def label_info(summary: LabelSummary, problem_type: str, source: str, label: str) -> LabelInfo:
    """The problem and the classes from the merged label summary, with the one-process reader's refusals."""
    if summary.count == 0:
        raise DataError(f"{source}: label column {label!r} has no values (all missing)")
    distinct = MAX_CLASSES + 1 if summary.overflow else len(summary.values)
    kind: ProblemType
    if problem_type != "auto":
        kind = problem_type  # type: ignore[assignment]
    elif not summary.numeric:
        kind = "binary" if distinct <= 2 else "multiclass"
    elif distinct <= 2:
        kind = "binary"
    elif summary.whole and distinct <= _MAX_CLASSES_FOR_INT and distinct < 0.5 * summary.count:
        kind = "multiclass"
    else:
        kind = "regression"
    if kind == "regression":
        if not summary.numeric:
            raise DataError(f"{source}: column {label!r} must be numeric for regression but holds text")
        return LabelInfo("regression", [])
    if summary.overflow:
        raise DataError(f"{source}: label column {label!r} has more than {MAX_CLASSES} classes")
    classes = _sorted_classes(summary.values)
    if len(classes) < 2:
        raise DataError(
            f"{source}: label column {label!r} has a single class ({classes[0]!r}); classification needs at least two"
        )
    if kind == "binary" and len(classes) > 2:
        raise DataError(f"{source}: label column {label!r} has {len(classes)} classes but problemType is binary")
    return LabelInfo(kind, classes)


# ----------------------------------------------------------------------------------------- numeric columns


@dataclass
class Moments:
    """Per column over the non-missing values: count, sum, min, max; ``central`` holds sum((x - m)^2) and
    sum((x - m)^3) around a mean ``m`` every rank was given (the second round)."""

    count: np.ndarray
    total: np.ndarray
    low: np.ndarray
    high: np.ndarray
    missing: np.ndarray  # any missing value in the column


def moments(values: np.ndarray) -> Moments:
    present = ~np.isnan(values)
    filled = np.where(present, values, 0.0)
    inf = np.full(values.shape[1], np.inf)
    return Moments(
        count=present.sum(axis=0).astype(np.int64),
        total=filled.sum(axis=0, dtype=np.float64),
        low=np.where(present, values, np.inf).min(axis=0, initial=np.inf) if len(values) else inf,
        high=np.where(present, values, -np.inf).max(axis=0, initial=-np.inf) if len(values) else -inf,
        missing=(~present).any(axis=0) if len(values) else np.zeros(values.shape[1], dtype=bool),
    )


def merge_moments(parts: Sequence[Moments]) -> Moments:
    return Moments(
        count=np.sum([p.count for p in parts], axis=0),
        total=np.sum([p.total for p in parts], axis=0),
        low=np.min([p.low for p in parts], axis=0),
        high=np.max([p.high for p in parts], axis=0),
        missing=np.any([p.missing for p in parts], axis=0),
    )


def central(values: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """(2, columns): the sums of squared and cubed deviations from ``mean`` over the non-missing values."""
    d = np.nan_to_num(values - mean, nan=0.0)
    return np.stack([(d**2).sum(axis=0, dtype=np.float64), (d**3).sum(axis=0, dtype=np.float64)])


@dataclass
class Sketch:
    """Per column: how many non-missing values, and QUANTILE_POINTS of their quantiles (empty without values)."""

    counts: list[int]
    points: list[np.ndarray]


def sketch(values: np.ndarray, points: int = QUANTILE_POINTS) -> Sketch:
    refs = np.linspace(0.0, 1.0, points)
    counts, found = [], []
    for j in range(values.shape[1]):
        col = values[:, j][~np.isnan(values[:, j])]
        counts.append(int(col.size))
        found.append(np.quantile(col, refs) if col.size else np.empty(0))
    return Sketch(counts, found)


def _cdf(q: np.ndarray, x: np.ndarray, side: str) -> np.ndarray:
    """A shard's fraction of values below (side "left") or at most (side "right") each ``x``: linear between its
    quantile points, with a tie (equal points) a jump."""
    levels = np.linspace(0.0, 1.0, len(q))
    j = np.searchsorted(q, x, side=side)  # type: ignore[call-overload]
    inside = (j > 0) & (j < len(q))
    lo, hi = np.clip(j - 1, 0, len(q) - 1), np.clip(j, 0, len(q) - 1)
    gap = np.where(q[hi] > q[lo], q[hi] - q[lo], 1.0)
    between = levels[lo] + (x - q[lo]) / gap * (levels[hi] - levels[lo])
    return np.where(inside, between, np.where(j >= len(q), 1.0, 0.0))


def merged_quantiles(parts: Sequence[Sketch], column: int, refs: np.ndarray) -> np.ndarray:
    """Quantiles ``refs`` (in [0, 1]) of one column over every shard: the inverse of the mixture of the shards'
    CDFs on the union of their quantile points; a level inside a tie's jump is the tied value itself."""
    shards = [(p.counts[column], p.points[column]) for p in parts if p.counts[column] > 0]
    if not shards:
        return np.empty(0)
    total = sum(n for n, _ in shards)
    grid = np.unique(np.concatenate([q for _, q in shards]))
    below = sum(n / total * _cdf(q, grid, "left") for n, q in shards)
    at_most = sum(n / total * _cdf(q, grid, "right") for n, q in shards)
    below, at_most = np.maximum.accumulate(below), np.maximum.accumulate(at_most)
    i = np.clip(np.searchsorted(at_most, refs - 1e-12, side="left"), 0, len(grid) - 1)
    prev = np.clip(i - 1, 0, len(grid) - 1)
    span = np.where(below[i] > at_most[prev], below[i] - at_most[prev], 1.0)
    t = np.clip((refs - at_most[prev]) / span, 0.0, 1.0)
    interpolated = grid[prev] + t * (grid[i] - grid[prev])
    return np.where((refs >= below[i]) | (i == 0), grid[i], interpolated)
