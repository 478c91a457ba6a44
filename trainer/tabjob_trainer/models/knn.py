"""KNN: scikit-learn's k nearest neighbours over the numeric columns, standardized, missing values at the median.

String columns are left out, as AutoGluon's KNN leaves them (a category code has no distance); a table without a
numeric column uses the codes rather than nothing. A saved model is its scaled training rows and labels (``.npy``)
and its settings (JSON); loading rebuilds the neighbour index from them, which is what fitting one is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

from tabjob import families
from tabjob_trainer.models.base import Family, FitContext, Trained, usable_cpus
from tabjob_trainer.preprocess import Encoded, column_medians
from tabjob_trainer.problem import ProblemType


def _columns(x: Encoded) -> np.ndarray:
    if x.numeric.shape[1]:
        return x.numeric.astype(np.float64)
    codes = x.categorical.astype(np.float64)
    codes[codes < 0] = np.nan
    return codes


class KNNModel:
    def __init__(
        self, x: np.ndarray, y: np.ndarray, scale: dict[str, list[float]], params: dict[str, Any], meta: dict[str, Any]
    ) -> None:
        self.x, self.y, self.scale, self.params, self.meta = x, y, scale, params, meta
        regression = meta["problem"] == "regression"
        k = min(int(params.get("n_neighbors", 5)), len(y))
        self.index: Any = (KNeighborsRegressor if regression else KNeighborsClassifier)(**{**params, "n_neighbors": k})
        self.index.fit(x, y)

    @staticmethod
    def transform(values: np.ndarray, scale: dict[str, list[float]]) -> np.ndarray:
        median, mean, std = (np.asarray(scale[k]) for k in ("median", "mean", "std"))
        filled = np.where(np.isnan(values), median, values)
        return ((filled - mean) / std).astype(np.float32)

    def predict(self, x: Encoded) -> np.ndarray:
        rows = self.transform(_columns(x), self.scale)
        if self.meta["problem"] == "regression":
            return np.asarray(self.index.predict(rows), dtype=np.float64)
        proba = np.zeros((len(rows), int(self.meta["n_classes"])))
        proba[:, [int(c) for c in self.index.classes_]] = self.index.predict_proba(rows)
        return proba[:, 1] if self.meta["problem"] == "binary" else proba

    def save(self, directory: Path) -> None:
        np.save(directory / "rows.npy", self.x, allow_pickle=False)
        np.save(directory / "labels.npy", self.y, allow_pickle=False)
        (directory / "knn.json").write_text(json.dumps({"scale": self.scale, "params": self.params, **self.meta}))

    @classmethod
    def load(cls, directory: Path, problem: ProblemType) -> KNNModel:
        meta = json.loads((directory / "knn.json").read_text())
        x = np.load(directory / "rows.npy", allow_pickle=False)
        y = np.load(directory / "labels.npy", allow_pickle=False)
        scale, params = meta.pop("scale"), meta.pop("params")
        # The fit's threads in the trainer, the process's usable CPUs once loaded.
        return cls(x, y, scale, {**params, "n_jobs": usable_cpus()}, {**meta, "problem": problem})


def fit(ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray) -> Trained | None:
    if ctx.distributed:
        raise ValueError("KNN trains one fit per process")
    note = ctx.cpu_instead("scikit-learn's KNeighbors runs on the CPU only") if ctx.device != "cpu" else None
    hp = families.KNN.effective(ctx.hyperparameters)
    values = _columns(train)
    median = column_medians(values)
    filled = np.where(np.isnan(values), median, values)
    std = filled.std(axis=0)
    scale = {
        "median": median.tolist(),
        "mean": filled.mean(axis=0).tolist(),
        "std": np.where(std > 0, std, 1.0).tolist(),
    }
    x = KNNModel.transform(values, scale)
    params = {**hp, "n_jobs": max(1, ctx.threads)}
    model = KNNModel(x, y_train, scale, params, {"problem": ctx.problem, "n_classes": ctx.n_classes})
    return Trained(model=model, device="cpu", fallback=note is not None, note=note, best_iteration=1)


FAMILY = Family(facts=families.KNN, fit=fit, load=KNNModel.load)
