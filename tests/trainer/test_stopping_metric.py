"""GBM's stopping metric: the error itself for accuracy, and every stopping metric's sharded form equal to one
process's value on the same rows (the ranks' sums reduced)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import log_loss, mean_absolute_error, roc_auc_score

from tabjob_trainer.models.gbm import stopping_metric
from tabjob_trainer.sharded.metrics import reduced, sums


@pytest.mark.parametrize(
    ("metric", "problem", "expected"),
    [
        ("accuracy", "multiclass", "multi_error"),
        ("accuracy", "binary", "binary_error"),
        ("log_loss", "multiclass", "multi_logloss"),
        ("log_loss", "binary", "binary_logloss"),
        ("roc_auc", "binary", "auc"),
        ("rmse", "regression", "rmse"),
        ("mae", "regression", "l1"),
    ],
)
def test_gbm_stops_on_the_metric_closest_to_the_eval_metric(metric: str, problem: str, expected: str) -> None:
    assert stopping_metric(metric, problem) == expected


def _whole(name: str, y: np.ndarray, pred: np.ndarray) -> float:
    """One process's value, by the usual definitions."""
    if name == "multi_error":
        return float(np.mean(pred.argmax(axis=1) != y))
    if name == "binary_error":
        return float(np.mean((pred > 0.5) != (y > 0.5)))
    if name == "multi_logloss":
        return float(log_loss(y, pred, labels=list(range(pred.shape[1]))))
    if name == "binary_logloss":
        return float(log_loss(y, pred, labels=[0, 1]))
    if name == "auc":
        return float(roc_auc_score(y, pred))
    if name == "l1":
        return float(mean_absolute_error(y, pred))
    return float(np.sqrt(np.mean((y - pred) ** 2)))


STOPPING = ["multi_error", "binary_error", "multi_logloss", "binary_logloss", "auc", "l1", "rmse"]


@pytest.mark.parametrize("name", STOPPING)
def test_each_stopping_metric_reduced_over_three_ranks_is_the_whole_sets(name: str) -> None:
    rng = np.random.default_rng(7)
    n = 600
    if name.startswith("multi"):
        y: np.ndarray = rng.integers(0, 4, n)
        pred = rng.dirichlet(np.ones(4), n)
    elif name in ("binary_error", "binary_logloss", "auc"):
        y = rng.integers(0, 2, n).astype(np.float64)
        pred = np.clip(0.3 * y + 0.7 * rng.random(n), 0.0, 1.0)
    else:
        y = rng.normal(size=n)
        pred = y + rng.normal(scale=0.5, size=n)
    parts = [(y[s], pred[s]) for s in np.array_split(np.arange(n), 3)]
    # Rank 0's view: its own rows' sums, reduced with the other two ranks' (the all-reduce, played here).
    others = np.sum([sums(name, yy, pp) for yy, pp in parts[1:]], axis=0)
    got = reduced(name, *parts[0], lambda mine: mine + others)
    assert got == pytest.approx(_whole(name, y, pred), abs=1e-3 if name == "auc" else 1e-9)
