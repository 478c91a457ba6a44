"""Metrics, each reported higher-is-better as AutoGluon does: errors (rmse, mae, log_loss) are negated.

Predictions come in one shape per problem: binary -> P(class 1) as (n,), multiclass -> probabilities (n, k),
regression -> values (n,).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sklearn import metrics as skm

from tabjob.families import CLASSIFICATION_METRICS, ERROR_METRICS, REGRESSION_METRICS
from tabjob_trainer.problem import ProblemType


def default_metric(problem: ProblemType) -> str:
    return "rmse" if problem == "regression" else "accuracy"


def resolve_metric(name: str, problem: ProblemType) -> str:
    metric = default_metric(problem) if name == "auto" else name
    allowed = REGRESSION_METRICS if problem == "regression" else CLASSIFICATION_METRICS
    if metric not in allowed:
        raise ValueError(f"evalMetric {metric!r} does not apply to {problem}; use one of {', '.join(allowed)}")
    return metric


def to_labels(pred: np.ndarray, problem: ProblemType) -> np.ndarray:
    if problem == "binary":
        return (pred >= 0.5).astype(np.int64)
    return np.argmax(pred, axis=1)


def score(metric: str, problem: ProblemType, y: np.ndarray, pred: np.ndarray, n_classes: int = 0) -> float:
    """The metric's value, higher is better."""
    value = _SCORERS[metric](y, pred, problem, n_classes)
    return -value if metric in ERROR_METRICS else value  # lower is better natively: negated


def _acc(y: np.ndarray, p: np.ndarray, problem: ProblemType, k: int) -> float:
    return float(skm.accuracy_score(y, to_labels(p, problem)))


def _bacc(y: np.ndarray, p: np.ndarray, problem: ProblemType, k: int) -> float:
    return float(skm.balanced_accuracy_score(y, to_labels(p, problem)))


def _f1(y: np.ndarray, p: np.ndarray, problem: ProblemType, k: int) -> float:
    average = "binary" if problem == "binary" else "macro"
    return float(skm.f1_score(y, to_labels(p, problem), average=average))


def _auc(y: np.ndarray, p: np.ndarray, problem: ProblemType, k: int) -> float:
    if problem == "binary":
        return float(skm.roc_auc_score(y, p))
    probs = _normalise(p)
    present = np.unique(y)
    if len(present) < probs.shape[1]:  # a fold can miss a rare class; score the classes present
        probs = _normalise(probs[:, present])
        return float(skm.roc_auc_score(np.searchsorted(present, y), probs, multi_class="ovr"))
    return float(skm.roc_auc_score(y, probs, multi_class="ovr"))


def _logloss(y: np.ndarray, p: np.ndarray, problem: ProblemType, k: int) -> float:
    probs = np.column_stack([1 - p, p]) if problem == "binary" else _normalise(p)
    labels = list(range(max(k, probs.shape[1])))
    return float(skm.log_loss(y, np.clip(probs, 1e-15, 1.0), labels=labels))


def _normalise(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-15, None)
    return p / p.sum(axis=1, keepdims=True)


def _rmse(y: np.ndarray, p: np.ndarray, problem: ProblemType, k: int) -> float:
    return float(np.sqrt(np.mean((y - p) ** 2)))


def _mae(y: np.ndarray, p: np.ndarray, problem: ProblemType, k: int) -> float:
    return float(np.mean(np.abs(y - p)))


def _r2(y: np.ndarray, p: np.ndarray, problem: ProblemType, k: int) -> float:
    return float(skm.r2_score(y, p))


_SCORERS: dict[str, Callable[[np.ndarray, np.ndarray, ProblemType, int], float]] = {
    "accuracy": _acc,
    "balanced_accuracy": _bacc,
    "f1": _f1,
    "roc_auc": _auc,
    "log_loss": _logloss,
    "rmse": _rmse,
    "mae": _mae,
    "r2": _r2,
}
