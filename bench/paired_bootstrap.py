"""A paired bootstrap of the test-score gap between two systems that predicted the same test rows.

Each replicate draws the test rows with replacement, scores both systems on the same draw and keeps the
difference, so what the rows have in common (hard rows, label noise) cancels. The 95% interval of those
differences gives the verdict: a win where it lies above zero, a loss where it lies below, a tie where it holds zero.
Scores are higher-is-better (rmse negated), as everywhere in bench/.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

REPLICATES = 2000


@dataclass(frozen=True)
class Gap:
    mean: float  # the gap on the test rows themselves (a minus b)
    low: float  # 2.5th percentile of the replicates
    high: float  # 97.5th percentile

    @property
    def verdict(self) -> str:
        return "win" if self.low > 0 else "loss" if self.high < 0 else "tie"


def score(metric: str, y: np.ndarray, pred: np.ndarray, proba: np.ndarray | None) -> float:
    if metric == "accuracy":
        return float(np.mean(y == pred))
    if metric == "roc_auc":
        assert proba is not None
        return float(roc_auc_score(y, proba))
    if metric == "rmse":
        return -float(np.sqrt(np.mean((pred.astype(np.float64) - y.astype(np.float64)) ** 2)))
    raise ValueError(f"no bootstrap scorer for {metric!r}")


def paired_gap(
    metric: str,
    y: np.ndarray,
    a: tuple[np.ndarray, np.ndarray | None],
    b: tuple[np.ndarray, np.ndarray | None],
    seed: int = 0,
) -> Gap:
    """Gap of system a over system b; each side is (predictions, positive-class probabilities or None). For
    roc_auc ``y`` is 1 for the positive class."""
    rng = np.random.default_rng(seed)
    n = len(y)
    gaps = []
    for _ in range(REPLICATES):
        idx = rng.integers(0, n, size=n)
        if metric == "roc_auc" and len(np.unique(y[idx])) < 2:
            continue  # an AUC needs both classes in the draw
        pa, pb = a[1][idx] if a[1] is not None else None, b[1][idx] if b[1] is not None else None
        gaps.append(score(metric, y[idx], a[0][idx], pa) - score(metric, y[idx], b[0][idx], pb))
    low, high = np.percentile(gaps, [2.5, 97.5])
    return Gap(mean=score(metric, y, a[0], a[1]) - score(metric, y, b[0], b[1]), low=float(low), high=float(high))


def labelled_gap(
    problem: str,
    metric: str,
    y: pd.Series,
    ours: tuple[pd.Series, pd.Series | None],
    theirs: tuple[pd.Series, pd.Series | None],
    positive: str | None,
) -> Gap:
    """``paired_gap`` on a table's test labels: each side's predictions (labels as written, or numbers) and, for
    roc_auc, the positive class's probabilities; rmse for regression, accuracy on the labels as strings."""
    if problem == "regression":
        return paired_gap("rmse", y.to_numpy(np.float64), (ours[0].to_numpy(), None), (theirs[0].to_numpy(), None))
    truth = y.astype(str).to_numpy()
    if metric == "accuracy":
        return paired_gap("accuracy", truth, (ours[0].astype(str).to_numpy(), None),
                          (theirs[0].astype(str).to_numpy(), None))  # fmt: skip
    assert positive is not None and ours[1] is not None and theirs[1] is not None
    labels = (truth == positive).astype(int)
    return paired_gap("roc_auc", labels, (ours[0].to_numpy(), ours[1].to_numpy()),
                      (theirs[0].to_numpy(), theirs[1].to_numpy()))  # fmt: skip
