"""CAT: CatBoost with early stopping on the fold's validation rows, its GPU learner when the fit holds a GPU.

String columns reach CatBoost as their category codes, declared categorical, so its ordered target statistics
(the reason to have CatBoost beside LightGBM on tables with string columns) see them; missing and unseen values
are one more category (code -1). A GPU fit uses ``task_type=GPU`` on the fit's device; CatBoost raises when it
finds no usable CUDA device, which is an error naming the way out, or the CPU under onGpuUnavailable:
FallbackToCPU, recorded on the result, never silent.
"""

from __future__ import annotations

import re
import time
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from catboost import CatBoost, CatBoostError, Pool

from tabjob import families
from tabjob_trainer.models.base import Family, FitContext, Trained, usable_cpus
from tabjob_trainer.models.patience import Stopper, stopper
from tabjob_trainer.preprocess import Encoded

# CPU-only options CatBoost refuses on its GPU learner; a portfolio config may carry them.
_CPU_ONLY = ("rsm",)


def to_frame(x: Encoded) -> pd.DataFrame:
    """Numeric columns as floats (NaN is CatBoost's missing value), then the categorical codes as integers."""
    numeric = {f"n{i}": x.numeric[:, i] for i in range(x.numeric.shape[1])}
    categorical = {f"c{i}": x.categorical[:, i] for i in range(x.categorical.shape[1])}
    return pd.DataFrame({**numeric, **categorical})


def _pool(x: Encoded, y: np.ndarray | None = None) -> Pool:
    cat = list(range(x.numeric.shape[1], x.numeric.shape[1] + x.categorical.shape[1]))
    return Pool(to_frame(x), label=y, cat_features=cat)


def loss_function(problem: str, metric: str) -> str:
    if problem == "binary":
        return "Logloss"
    if problem == "multiclass":
        return "MultiClass"
    return "MAE" if metric == "mae" else "RMSE"


def eval_metric(problem: str, metric: str) -> str:
    """CatBoost's metric closest to the job's: early stopping and the learning curve follow it."""
    if problem == "binary" and metric == "roc_auc":
        return "AUC"
    if problem != "regression" and metric in ("accuracy", "balanced_accuracy"):
        return "Accuracy" if problem == "multiclass" else "Logloss"  # a binary threshold metric stops too early
    return loss_function(problem, metric)


@cache
def _gpu_failure(index: int) -> str | None:
    """None if CatBoost trains on this CUDA device here, else CatBoost's reason (once per process)."""
    x = np.random.default_rng(0).random((64, 2))
    try:
        CatBoost({"task_type": "GPU", "devices": str(index), "iterations": 1, "verbose": False}).fit(
            x, (x[:, 0] > 0.5).astype(int)
        )
    except CatBoostError as exc:
        return reason(str(exc)) or type(exc).__name__
    return None


def reason(message: str) -> str:
    """CatBoost's own words, without the source file and line it prefixes them with."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return re.sub(r"^\S+\.(?:h|cpp|cu):\d+: ", "", first)


def choose_device(ctx: FitContext) -> tuple[dict[str, Any], str, str | None]:
    """(CatBoost device parameters, device label, note) for this fit."""
    index = ctx.cuda_index()
    if index is None:
        return {"task_type": "CPU"}, "cpu", None
    why = _gpu_failure(index)
    if why is None:
        return {"task_type": "GPU", "devices": str(index)}, f"cuda:{index}", None
    return {"task_type": "CPU"}, "cpu", ctx.cpu_instead(f"CatBoost cannot use the GPU here ({why})")


class CATModel:
    def __init__(self, model: CatBoost, problem: str, threads: int) -> None:
        self.model = model
        self.problem = problem
        self.threads = threads  # the fit's threads in the trainer, the process's usable CPUs once loaded

    def predict(self, x: Encoded) -> np.ndarray:
        kind = "RawFormulaVal" if self.problem == "regression" else "Probability"
        out = np.asarray(self.model.predict(_pool(x), prediction_type=kind, thread_count=self.threads), np.float64)
        return out[:, 1] if self.problem == "binary" else out

    def save(self, directory: Path) -> None:
        self.model.save_model(str(directory / "model.cbm"))

    @classmethod
    def load(cls, directory: Path, problem: str) -> CATModel:
        model = CatBoost()
        model.load_model(str(directory / "model.cbm"))
        return cls(model, problem, usable_cpus())


# CatBoost's metrics that improve upwards; the rest tabjob stops on (losses, RMSE, MAE) improve downwards.
_HIGHER_IS_BETTER = frozenset({"AUC", "Accuracy"})


class _Stopping:
    """Early stopping by the patience tracker on the validation metric, and the job's deadline (CatBoost's CPU
    learner only: its GPU learner takes no callbacks). ``use_best_model`` then keeps the best iteration."""

    def __init__(self, stop: Stopper | None, metric: str, deadline: float | None) -> None:
        self.stop = stop
        self.metric = metric
        self.deadline = deadline

    def after_iteration(self, info: Any) -> bool:
        """False stops training."""
        if self.deadline is not None and time.time() >= self.deadline:
            return False
        if self.stop is None:
            return True
        value = float(info.metrics["validation"][self.metric][-1])
        return not self.stop.update(int(info.iteration), value, self.metric in _HIGHER_IS_BETTER)


def fit(ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray) -> Trained | None:
    if ctx.distributed:
        raise ValueError("CAT trains one fit per process: CatBoost has no data-parallel learner here")
    hp = families.CAT.effective(ctx.hyperparameters)
    device_params, device, note = choose_device(ctx)
    params: dict[str, Any] = {
        **hp,
        **device_params,
        "loss_function": loss_function(ctx.problem, ctx.metric),
        "eval_metric": eval_metric(ctx.problem, ctx.metric),
        "thread_count": max(1, ctx.threads),
        "random_seed": ctx.seed,
        "use_best_model": not ctx.refit,  # a refit keeps every iteration it was given
        "allow_writing_files": False,
        "verbose": False,
    }
    for key in families.CAT.loop_settings:  # tabjob's loop keys, not CatBoost's
        del params[key]
    stop = stopper(hp, len(y_train))  # a refit's early_stopping_rounds is 0: it trains every iteration
    if ctx.problem == "multiclass":
        params["classes_count"] = ctx.n_classes
    callbacks = None
    if device != "cpu":
        for key in _CPU_ONLY:
            params.pop(key, None)
        if stop is not None:  # no callbacks on the GPU: CatBoost's own fixed patience, the tracker's least
            params["early_stopping_rounds"] = stop.least
    elif stop is not None or ctx.deadline is not None:
        callbacks = [_Stopping(stop, params["eval_metric"], ctx.deadline)]
    model = CatBoost(params)
    model.fit(_pool(train, y_train), eval_set=_pool(val, y_val), callbacks=callbacks)
    curve_metric = params["eval_metric"]
    history = model.get_evals_result().get("validation", {})
    return Trained(
        model=CATModel(model, ctx.problem, max(1, ctx.threads)),
        device=device,
        fallback=note is not None,
        note=note,
        curve={"metric": curve_metric, "val": [float(v) for v in history.get(curve_metric, [])]},
        importance={n: float(g) for n, g in zip(ctx.feature_names, model.get_feature_importance(), strict=False)},
        # Trees kept, as LightGBM's and XGBoost's count (use_best_model cuts the model at its best iteration):
        # get_best_iteration() is an index, one short of the count a refit should train.
        best_iteration=int(model.tree_count_ or 0),
    )


FAMILY = Family(facts=families.CAT, fit=fit, load=CATModel.load)
