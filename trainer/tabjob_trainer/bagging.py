"""From fit records to models: a bagged model averages its fold models, out-of-fold predictions per row.

Pure functions over records and arrays; the leaderboard and the predictor both use them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tabjob.contracts.plan import Plan
from tabjob.contracts.results import FitState
from tabjob_trainer.record import FitRecord


def model_name(config: str, trial: int, trials: int) -> str:
    """AutoGluon-like names: the config name, with /T<n> when a config has several trials."""
    return config if trials <= 1 else f"{config}/T{trial + 1}"


@dataclass
class BaggedModel:
    """One leaderboard model while it is assembled: one trial of one config, its folds' predictions combined.

    Its status row on the wire is ``results.ModelResult``.
    """

    name: str
    config: str
    key: str
    order: int
    trial: int
    fits: list[FitRecord]
    val_rows: np.ndarray | None = None  # row indices the validation predictions cover
    val_pred: np.ndarray | None = None
    test_pred: np.ndarray | None = None
    state: FitState = "Succeeded"
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def fit_time(self) -> float:
        return float(sum(f.fit_time for f in self.fits))

    @property
    def pred_time_val(self) -> float:
        return float(sum(f.pred_time_val for f in self.fits))

    @property
    def predict_ms_per_1000_rows(self) -> float | None:
        """Milliseconds to predict 1,000 new rows: every fold model scores every row, so the folds' costs add up
        (each measured on its own validation rows). None when a fold has no timing."""
        costs = [1e6 * f.pred_time_val / f.rows_val for f in self.fits if f.rows_val]
        return float(sum(costs)) if costs and len(costs) == len(self.fits) else None

    @property
    def devices(self) -> str:
        return ",".join(sorted({f.device for f in self.fits if f.device}))

    @property
    def fallback(self) -> bool:
        """A fold asked for a GPU and trained on the CPU."""
        return any(f.fallback for f in self.fits)


def expected_fits(plan: Plan) -> dict[tuple[int, str, int], int]:
    """The planned fits of each (order, config, trial): a bag is whole when that many succeeded."""
    counts: dict[tuple[int, str, int], int] = {}
    for f in plan.fits:
        key = (f.order, f.model, f.trial)
        counts[key] = counts.get(key, 0) + 1
    return counts


def group_fits(records: list[FitRecord]) -> dict[tuple[int, str, int], list[FitRecord]]:
    groups: dict[tuple[int, str, int], list[FitRecord]] = defaultdict(list)
    for rec in records:
        groups[(rec.order, rec.model, rec.trial)].append(rec)
    return dict(sorted(groups.items()))


def combine(
    name: str, fits: list[FitRecord], arrays: dict[str, dict[str, np.ndarray]], n_rows: int, expected: int
) -> BaggedModel:
    """Average fold predictions. ``arrays[fit_id]`` holds ``val_idx``, ``val_pred`` and maybe ``test_pred``."""
    first = fits[0]
    result = BaggedModel(name, first.model, first.key, first.order, first.trial, fits)
    bad = [f for f in fits if not f.succeeded]
    if bad or len(fits) < expected:
        result.state = "Skipped" if bad and all(f.state == "Skipped" for f in bad) else "Failed"
        n_bad = len(bad) + expected - len(fits)
        if bad:
            worst = bad[0]
            cls = f"{worst.error_class}: " if worst.error_class else ""
            result.message = f"{n_bad} of {expected} fits {worst.state.lower()}: {cls}{worst.message or ''}"
        else:
            result.message = f"{n_bad} of {expected} fits failed: Incomplete: fits missing"
        return result
    sums: np.ndarray | None = None
    counts = np.zeros(n_rows, dtype=np.int64)
    tests = []
    for f in fits:
        a = arrays[f.id]
        idx, pred = a["val_idx"], a["val_pred"]
        if sums is None:
            sums = np.zeros((n_rows, *pred.shape[1:]), dtype=np.float64)
        sums[idx] += pred
        counts[idx] += 1
        if "test_pred" in a:
            tests.append(a["test_pred"])
    assert sums is not None
    rows = np.flatnonzero(counts)
    shape = (-1,) + (1,) * (sums.ndim - 1)
    result.val_rows = rows
    result.val_pred = sums[rows] / counts[rows].reshape(shape)
    result.test_pred = np.mean(tests, axis=0) if tests else None
    return result
