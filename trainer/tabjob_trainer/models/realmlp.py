"""REALMLP: RealMLP-TD from its authors' pytabkit, on the fit's device (a CUDA GPU under the resource hierarchy).

pytabkit preprocesses by itself (one-hot or embeddings for string columns, robust scaling and smooth clipping of the
numeric ones) except for missing numeric values, which are set to the training rows' medians here. It trains on the
fit's rows, keeps the best epoch on the validation rows (class error for accuracy, cross-entropy without label
smoothing for the other classification metrics, as its authors advise) and, for a refit, stops at the epoch it is
given within the same schedule.

A saved model is pytabkit's fitted estimator written by ``torch.save``, and it is loaded with torch's weights-only
unpickler, allowed only the classes and functions the file names from pytabkit, scikit-learn, numpy, pandas, torch
and Lightning (and ``getattr``, ``slice`` and ``functools.partial``, which that unpickler lets build objects but never
call): a file naming anything else is refused before it is read.
"""

from __future__ import annotations

import importlib
import io
import json
import logging
import pickle
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from tabjob import families
from tabjob_trainer.models.base import Family, FitContext, Trained, usable_cpus
from tabjob_trainer.preprocess import Encoded, column_medians
from tabjob_trainer.problem import ProblemType

_ALLOWED_ROOTS = ("pytabkit", "sklearn", "numpy", "pandas", "torch", "lightning_fabric", "pytorch_lightning")
_ALLOWED_NAMES = ("builtins.getattr", "builtins.slice", "functools.partial", "collections.OrderedDict")
_NAMED = re.compile(r"(?:GLOBAL |got <class ')([\w.]+)")  # what torch's unpickler says it was not allowed
_MAX_ROUNDS = 64

for _name in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "lightning"):
    logging.getLogger(_name).setLevel(logging.ERROR)  # its banners go to the rank's log, not the FitEvent stream


def frame(x: Encoded, medians: list[float], cardinalities: list[int]) -> pd.DataFrame:
    """The fit's columns as pytabkit takes them: numbers with missing values at the medians, string columns as
    categories of their training codes plus one (the column's cardinality) for missing and unseen values."""
    numeric = np.where(np.isnan(x.numeric), np.asarray(medians, dtype=np.float32), x.numeric)
    columns: dict[str, Any] = {f"n{i}": numeric[:, i] for i in range(numeric.shape[1])}
    for j, card in enumerate(cardinalities):
        codes = x.categorical[:, j].astype(np.int64)
        columns[f"c{j}"] = pd.Categorical(np.where(codes < 0, card, codes), categories=list(range(card + 1)))
    return pd.DataFrame(columns)


class RealMLPModel:
    def __init__(self, estimator: Any, meta: dict[str, Any]) -> None:
        self.estimator, self.meta = estimator, meta

    def predict(self, x: Encoded) -> np.ndarray:
        df = frame(x, self.meta["medians"], self.meta["cardinalities"])
        problem = self.meta["problem"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if problem == "regression":
                return np.asarray(self.estimator.predict(df), dtype=np.float64).reshape(-1)
            proba = np.asarray(self.estimator.predict_proba(df), dtype=np.float64)
        full = np.zeros((len(df), int(self.meta["n_classes"])))
        full[:, [int(c) for c in self.estimator.classes_]] = proba
        return full[:, 1] if problem == "binary" else full

    def save(self, directory: Path) -> None:
        buf = io.BytesIO()
        torch.save(self.estimator, buf)
        (directory / "realmlp.pt").write_bytes(buf.getvalue())
        (directory / "realmlp.json").write_text(json.dumps(self.meta))

    @classmethod
    def load(cls, directory: Path, problem: ProblemType) -> RealMLPModel:
        meta = json.loads((directory / "realmlp.json").read_text())
        path = directory / "realmlp.pt"
        # torch names most of what the file needs up front; the rest (numpy's dtype classes) only as it meets them.
        allowed = {
            name: _vetted(name, path) for name in torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
        }
        for _ in range(_MAX_ROUNDS):
            try:
                with torch.serialization.safe_globals(list(allowed.values())), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    estimator = torch.load(path, map_location="cpu", weights_only=True)
                break
            except pickle.UnpicklingError as exc:
                found = _NAMED.search(str(exc))
                if found is None or found.group(1) in allowed:
                    raise
                allowed[found.group(1)] = _vetted(found.group(1), path)
        else:
            raise ValueError(f"{path.name}: more than {_MAX_ROUNDS} kinds of object; not loading it")
        estimator.n_threads = usable_cpus()
        return cls(estimator, {**meta, "problem": problem})


def _vetted(name: str, path: Path) -> Any:
    """The object ``name`` stands for, if a RealMLP model may hold it; else the load is refused."""
    parts = name.split(".")
    if name not in _ALLOWED_NAMES and parts[0] not in _ALLOWED_ROOTS:
        raise ValueError(f"{path.name} names {name}, which a RealMLP model never holds; not loading it")
    for cut in range(len(parts) - 1, 0, -1):  # a nested name (a class's method) lives below its module
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            found = getattr(found, attr)
        return found
    raise ValueError(f"{path.name} names {name}, which is not importable here; not loading it")


def _estimator(ctx: FitContext, hp: dict[str, Any]) -> Any:
    from pytabkit import RealMLP_TD_Classifier, RealMLP_TD_Regressor

    params = dict(hp)
    if ctx.problem != "regression" and ctx.metric != "accuracy":
        params.setdefault("val_metric_name", "cross_entropy")  # its authors' advice for AUC and log-loss
        params.setdefault("use_ls", False)
    kind = RealMLP_TD_Regressor if ctx.problem == "regression" else RealMLP_TD_Classifier
    return kind(device=ctx.device, random_state=ctx.seed, n_threads=max(1, ctx.threads), verbosity=0, **params)


def fit(ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray) -> Trained | None:
    if ctx.distributed:
        raise ValueError("REALMLP trains one fit per process")
    hp = families.REALMLP.effective(ctx.hyperparameters)
    medians = [float(v) for v in column_medians(train.numeric)]
    cards = [int(c) for c in ctx.cardinalities]
    x_train, x_val = frame(train, medians, cards), frame(val, medians, cards)
    estimator = _estimator(ctx, hp)
    left = ctx.time_left()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(
            x_train,
            y_train,
            X_val=x_val,
            y_val=y_val,
            cat_col_names=[f"c{j}" for j in range(len(cards))],
            time_to_fit_in_seconds=None if left is None else max(1, int(left)),
        )
    stop = estimator.fit_params_.get("stop_epoch", {}) if isinstance(estimator.fit_params_, dict) else {}
    best = int(next(iter(stop.values()))) if stop else int(hp.get("stop_epoch") or hp["n_epochs"])
    meta = {"medians": medians, "cardinalities": cards, "n_classes": ctx.n_classes}
    return Trained(
        model=RealMLPModel(estimator, {**meta, "problem": ctx.problem}),
        device=ctx.device,
        best_iteration=int(hp["stop_epoch"]) if ctx.refit and hp.get("stop_epoch") else best,
    )


FAMILY = Family(facts=families.REALMLP, fit=fit, load=RealMLPModel.load)
