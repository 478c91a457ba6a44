"""From fit records to models: a bagged model averages its fold models, out-of-fold predictions per row.

Pure functions over records and arrays; the leaderboard and the predictor both use them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def model_name(config: str, trial: int, trials: int) -> str:
    """AutoGluon-like names: the config name, with /T<n> when a config has several trials."""
    return config if trials <= 1 else f"{config}/T{trial + 1}"


@dataclass
class ModelResult:
    """One leaderboard model: one trial of one config, its folds combined."""

    name: str
    config: str
    key: str
    order: int
    trial: int
    fits: list[dict[str, Any]]
    val_rows: np.ndarray | None = None  # row indices the validation predictions cover
    val_pred: np.ndarray | None = None
    test_pred: np.ndarray | None = None
    status: str = "done"
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def fit_time(self) -> float:
        return float(sum(f.get("fitTime", 0.0) for f in self.fits))

    @property
    def pred_time_val(self) -> float:
        return float(sum(f.get("predTimeVal", 0.0) for f in self.fits))

    @property
    def devices(self) -> str:
        return ",".join(sorted({f.get("device", "") for f in self.fits if f.get("device")}))


def group_fits(records: list[dict[str, Any]]) -> dict[tuple[int, str, int], list[dict[str, Any]]]:
    groups: dict[tuple[int, str, int], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        groups[(rec["order"], rec["model"], rec["trial"])].append(rec)
    return dict(sorted(groups.items()))


def combine(
    name: str, fits: list[dict[str, Any]], arrays: dict[str, dict[str, np.ndarray]], n_rows: int, expected: int
) -> ModelResult:
    """Average fold predictions. ``arrays[fit_id]`` holds ``val_idx``, ``val_pred`` and maybe ``test_pred``."""
    first = fits[0]
    result = ModelResult(name, first["model"], first["key"], first["order"], first["trial"], fits)
    bad = [f for f in fits if f.get("status") != "done"]
    if bad or len(fits) < expected:
        worst = bad[0] if bad else {"status": "failed", "errorClass": "Incomplete", "message": "fits missing"}
        result.status = "skipped" if all(f.get("status") == "skipped" for f in bad) and bad else "failed"
        n_bad = len(bad) + expected - len(fits)
        cls = f"{worst.get('errorClass')}: " if worst.get("errorClass") else ""
        result.message = f"{n_bad} of {expected} fits {worst['status']}: {cls}{worst.get('message', '')}"
        return result
    sums: np.ndarray | None = None
    counts = np.zeros(n_rows, dtype=np.int64)
    tests = []
    for f in fits:
        a = arrays[f["id"]]
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
