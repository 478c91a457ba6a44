"""Validation splits. Seeds depend on the bag set only, never on the model, so every model's out-of-fold or
holdout predictions cover the same rows and the weighted ensemble can combine them."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split

from tabjob_trainer.problem import ProblemType

HOLDOUT_FRACTION = 0.2


def _stratify(y: np.ndarray, problem: ProblemType, folds: int) -> bool:
    if problem == "regression":
        return False
    counts = np.bincount(y.astype(np.int64))
    return bool(counts[counts > 0].min() >= folds)


def holdout(y: np.ndarray, problem: ProblemType, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, validation indices) for a model that is not bagged."""
    idx = np.arange(len(y))
    strat = y if _stratify(y, problem, 2) else None
    train, val = train_test_split(idx, test_size=HOLDOUT_FRACTION, random_state=seed, stratify=strat)
    return np.sort(train), np.sort(val)


def kfold(y: np.ndarray, problem: ProblemType, folds: int, bag_set: int, fold: int) -> tuple[np.ndarray, ...]:
    """(train indices, out-of-fold indices) of one fold of one bag set."""
    idx = np.arange(len(y))
    splitter: StratifiedKFold | KFold
    if _stratify(y, problem, folds):
        splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=bag_set)
    else:
        splitter = KFold(n_splits=folds, shuffle=True, random_state=bag_set)
    for i, (train, val) in enumerate(splitter.split(idx, y if problem != "regression" else None)):
        if i == fold:
            return train, val
    raise IndexError(f"fold {fold} out of {folds}")


def fit_split(
    y: np.ndarray, problem: ProblemType, folds: int, bag_set: int, fold: int | None
) -> tuple[np.ndarray, np.ndarray]:
    if fold is None:
        return holdout(y, problem)
    train, val = kfold(y, problem, folds, bag_set, fold)
    return train, val


MIN_VALIDATION_ROWS = 5  # fewer, and a fit's validation score is noise that still ranks it


def too_few_rows(rows: int, folds: int) -> str | None:
    """Why ``rows`` rows cannot be split for validation as the plan asks, or None when they can (pure)."""
    if folds >= 2:
        smallest = rows // folds
        if smallest < MIN_VALIDATION_ROWS or rows - -(-rows // folds) < MIN_VALIDATION_ROWS:
            return (
                f"{rows} rows are too few for {folds}-fold bagging: a fold would validate on {smallest} row(s) "
                f"(at least {MIN_VALIDATION_ROWS} needed); add rows or lower bagging.folds"
            )
        return None
    holdout_rows = int(np.ceil(rows * HOLDOUT_FRACTION))
    if holdout_rows < MIN_VALIDATION_ROWS or rows - holdout_rows < MIN_VALIDATION_ROWS:
        return (
            f"{rows} rows are too few for a {HOLDOUT_FRACTION:.0%} validation holdout: it would hold {holdout_rows} "
            f"row(s) (at least {MIN_VALIDATION_ROWS} needed, so at least "
            f"{int(np.ceil(MIN_VALIDATION_ROWS / HOLDOUT_FRACTION))} rows)"
        )
    return None
