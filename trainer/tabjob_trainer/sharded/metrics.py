"""Validation metrics over every rank's shard, from sums all-reduced over the fit's ranks (pure but for the reduce).

Each rank scores its own validation rows; what it sends is a few sums (a loss and a count), or for AUC two
histograms of the predicted probability (``AUC_BINS`` bins; ties within a bin count half, so the AUC is exact up to
the bins' width). Every rank then holds the same number, so early stopping stops every rank on the same iteration.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

AUC_BINS = 1 << 14
_EPS = 1e-15

Reduce = Callable[[np.ndarray], np.ndarray]  # the element-wise sum of an array over the fit's ranks


def sums(name: str, y: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """This rank's contribution to ``name`` (LightGBM's metric names) on its validation rows."""
    n = float(len(y))
    if name == "binary_logloss":
        p = np.clip(pred.reshape(-1), _EPS, 1 - _EPS)
        return np.array([-np.sum(y * np.log(p) + (1 - y) * np.log(1 - p)), n])
    if name == "multi_logloss":
        p = np.clip(pred.reshape(len(y), -1)[np.arange(len(y)), y.astype(np.int64)], _EPS, 1.0)
        return np.array([-np.sum(np.log(p)), n])
    if name == "binary_error":
        return np.array([np.sum((pred.reshape(-1) > 0.5) != (y > 0.5)), n])
    if name == "multi_error":
        return np.array([np.sum(pred.reshape(len(y), -1).argmax(axis=1) != y.astype(np.int64)), n])
    if name == "rmse":
        return np.array([np.sum((y - pred.reshape(-1)) ** 2), n])
    if name == "l1":
        return np.array([np.sum(np.abs(y - pred.reshape(-1))), n])
    if name == "auc":
        bins = np.minimum((np.clip(pred.reshape(-1), 0.0, 1.0) * AUC_BINS).astype(np.int64), AUC_BINS - 1)
        positive = np.bincount(bins[y > 0.5], minlength=AUC_BINS)
        negative = np.bincount(bins[y <= 0.5], minlength=AUC_BINS)
        return np.concatenate([positive, negative]).astype(np.float64)
    raise ValueError(f"no sharded form of the metric {name!r}")


def value(name: str, total: np.ndarray) -> float:
    """The metric from the reduced sums."""
    if name == "auc":
        positive, negative = total[:AUC_BINS], total[AUC_BINS:]
        below = np.cumsum(negative) - negative  # negatives in lower bins
        pairs = positive.sum() * negative.sum()
        return float(np.sum(positive * (below + 0.5 * negative)) / pairs) if pairs else 0.5
    mean = total[0] / max(total[1], 1.0)
    return float(np.sqrt(mean)) if name == "rmse" else float(mean)


def higher_is_better(name: str) -> bool:
    return name == "auc"


def reduced(name: str, y: np.ndarray, pred: np.ndarray, reduce: Reduce) -> float:
    return value(name, reduce(sums(name, y, pred)))
