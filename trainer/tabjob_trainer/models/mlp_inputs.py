"""The MLP's own numeric preprocessing, fitted on the fit's training rows and saved with the model.

Trees do not care how a column is scaled; a network does. After AutoGluon's tabular MLP: missing values are
filled with the training median and every column that had any gets a 0/1 "was missing" input beside it
(the fact of being missing often predicts); strongly skewed columns (|skewness| above a threshold: prices,
counts, incomes) go through a quantile transform to a standard normal, so a long tail cannot squash the bulk
of the values into a sliver of the input range; the rest are standardised. Values outside the training range
map to the edge quantiles, so unseen extremes stay bounded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

_QUANTILES = 200  # reference points per transformed column: plenty for a smooth map, small to save
_EDGE = 1e-4  # clip before the normal quantile function so the edges stay finite


def fit_numeric(numeric: np.ndarray, skew_threshold: float) -> dict[str, Any]:
    """JSON-able statistics of the training rows' numeric columns (n, d) with NaN for missing values."""
    values = numeric.astype(np.float64)
    d = values.shape[1]
    median = np.zeros(d)
    mean = np.zeros(d)
    std = np.ones(d)
    quantiles: list[list[float]] = []
    has_missing = np.isnan(values).any(axis=0) if len(values) else np.zeros(d, dtype=bool)
    for j in range(d):
        col = values[:, j][~np.isnan(values[:, j])]
        if col.size == 0:
            quantiles.append([])
            continue
        median[j] = float(np.median(col))
        spread = float(col.std())
        mean[j], std[j] = float(col.mean()), spread if spread > 0 else 1.0
        skew = float(np.mean((col - mean[j]) ** 3) / spread**3) if spread > 0 else 0.0
        distinct = np.unique(col).size
        # A quantile map needs enough distinct values to be more than a relabelling of a few levels.
        if abs(skew) > skew_threshold and distinct > 10:
            refs = np.linspace(0.0, 1.0, min(_QUANTILES, col.size))
            quantiles.append(np.quantile(col, refs).tolist())
        else:
            quantiles.append([])
    return {
        "median": median.tolist(),
        "mean": mean.tolist(),
        "std": std.tolist(),
        "quantiles": quantiles,
        "missing_columns": [int(j) for j in np.flatnonzero(has_missing)],
    }


def width(stats: dict[str, Any]) -> int:
    """Network inputs the numeric part contributes: one per column plus one per missing indicator."""
    return len(stats["median"]) + len(stats["missing_columns"])


def apply_numeric(stats: dict[str, Any], numeric: np.ndarray) -> np.ndarray:
    values = numeric.astype(np.float64)
    missing = np.isnan(values)
    values = np.where(missing, np.asarray(stats["median"], dtype=np.float64), values)
    out = (values - np.asarray(stats["mean"])) / np.asarray(stats["std"])
    for j, q in enumerate(stats["quantiles"]):
        if q:
            out[:, j] = _to_normal(values[:, j], np.asarray(q))
    indicators = missing[:, stats["missing_columns"]].astype(np.float64)
    return np.nan_to_num(np.hstack([out, indicators]), nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32)


def _to_normal(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    refs = np.linspace(0.0, 1.0, len(q))
    # Averaging the map from both sides gives tied reference values (a spike at 0) their middle rank.
    u = 0.5 * (np.interp(x, q, refs) - np.interp(-x, -q[::-1], -refs[::-1]))
    u = np.clip(u, _EDGE, 1.0 - _EDGE)
    return torch.special.ndtri(torch.from_numpy(u)).numpy()
