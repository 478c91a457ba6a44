"""XGB: XGBoost's histogram learner with early stopping, on the fit's CUDA device when it holds a GPU.

Categorical columns reach XGBoost as category codes in a ``category``-typed frame, so with
``enable_categorical`` (the default here) it splits on sets of categories as LightGBM does, up to
``max_native_levels`` levels (32): a column with more reaches it as ordinal codes, as every column does in a config
that turns ``enable_categorical`` off. A set split over hundreds of levels of a few rows each fits noise (on the
peer's tables, 3-fold bags of the default config: flights' tail numbers and destinations 0.673 -> 0.693 AUC,
midwest's counties 0.736 -> 0.764 accuracy, mpg's car models 2.27 -> 2.00 rmse, txhousing's cities 8,044 -> 7,919
rmse; a table's few-level columns, grunfeld's 11 firms, lose with ordinal codes: 46.5 -> 62.3). That held on two of
three held-out tables and failed on gapminder (its 185 countries as sets 0.712 rmse, as codes 0.928), so with
``compare_native_levels`` (the default) a fit with a column over the limit also trains every column as sets and
keeps the way whose stopping metric is better on its validation rows (level_ways.py); its refit trains the way most
folds kept. The collective fit keeps the limit's way.

A GPU fit uses ``device=cuda:N``. XGBoost does not refuse a CUDA device it
cannot use: it warns and trains on the CPU, so a one-round probe checks that the booster really runs on the GPU;
where it does not the fit fails naming the way out, or trains on the CPU under onGpuUnavailable: FallbackToCPU,
recorded on the result, never silent. A fit with processes > 1 trains through XGBoost's collective
(``xgb_collective.py``).
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xgboost as xgb

from tabjob import families
from tabjob.families.tree_loop import COMPARE_LEVELS
from tabjob_trainer.models.base import Family, FitContext, Trained, usable_cpus
from tabjob_trainer.models.level_ways import Way, kept_seconds, what_was_kept
from tabjob_trainer.models.patience import Stopper, deadline_check, stopper
from tabjob_trainer.preprocess import Encoded

# Not passed to XGBoost as parameters; they steer the training loop and the data.
_LOOP_KEYS = tuple(families.XGB.loop_settings)


def native_columns(hp: dict[str, Any], cardinalities: list[int], limit: int | None = None) -> list[bool]:
    """Which categorical columns XGBoost splits on as sets of levels (those of at most ``limit`` levels, the config's
    ``max_native_levels`` unless given); the others reach it as ordinal codes."""
    most = int(hp["max_native_levels"]) if limit is None else limit
    return [bool(hp["enable_categorical"]) and c <= most for c in cardinalities]


def level_limits(hp: dict[str, Any], cardinalities: list[int]) -> list[int]:
    """The ``max_native_levels`` a fit trains with, the config's first: with ``compare_native_levels``, where some
    string column has more levels than that, also every column as sets. Not every column as codes, as LightGBM's fit
    also tries: XGBoost's limit already sends the wide columns there, and on the one held-out table where codes won
    (storms' 260 names) the limit's way is that way (BENCHMARKS.md, "XGB's categorical columns")."""
    limit = int(hp["max_native_levels"])
    if not hp[COMPARE_LEVELS] or not hp["enable_categorical"] or not cardinalities or max(cardinalities) <= limit:
        return [limit]
    return [limit, max(cardinalities)]


def to_frame(x: Encoded, native: list[bool], cardinalities: list[int]) -> pd.DataFrame:
    numeric = {f"n{i}": x.numeric[:, i] for i in range(x.numeric.shape[1])}
    cats: dict[str, Any] = {}
    for i, codes in enumerate(x.categorical.T):
        if native[i]:
            # The encoder's codes are 0..cardinality-1 and -1 for missing or unseen: pandas' missing category,
            # XGBoost's missing-value branch. The categories are the training ones, so every frame agrees.
            levels = range(max(cardinalities[i], int(codes.max(initial=-1)) + 1, 1))
            cats[f"c{i}"] = pd.Categorical.from_codes(codes, categories=levels)
        else:
            cats[f"c{i}"] = np.where(codes < 0, np.nan, codes).astype(np.float32)
    return pd.DataFrame({**numeric, **cats})


def _matrix(x: Encoded, y: np.ndarray | None, native: list[bool], cardinalities: list[int]) -> xgb.DMatrix:
    if x.categorical.shape[1] == 0:
        # No category columns: the numeric block itself (float32, C-order), under the frame's column names, with no
        # frame built first (a copy of every row).
        names = [f"n{i}" for i in range(x.numeric.shape[1])]
        return xgb.DMatrix(x.numeric, label=y, feature_names=names, missing=np.nan)
    frame = to_frame(x, native, cardinalities)
    return xgb.DMatrix(frame, label=y, enable_categorical=any(native), missing=np.nan)


def _training_matrix(
    x: Encoded, y: np.ndarray, native: list[bool], cardinalities: list[int], ref: Any = None, max_bin: int = 256
) -> xgb.QuantileDMatrix:
    """Training rows quantised as they are read (its bins must be the booster's: ``max_bin``)."""
    if x.categorical.shape[1] == 0:
        names = [f"n{i}" for i in range(x.numeric.shape[1])]
        return xgb.QuantileDMatrix(x.numeric, label=y, feature_names=names, missing=np.nan, ref=ref, max_bin=max_bin)
    frame = to_frame(x, native, cardinalities)
    return xgb.QuantileDMatrix(frame, label=y, enable_categorical=any(native), missing=np.nan, ref=ref, max_bin=max_bin)


def objective(problem: str, n_classes: int, metric: str) -> dict[str, Any]:
    if problem == "binary":
        return {"objective": "binary:logistic", "eval_metric": "auc" if metric == "roc_auc" else "logloss"}
    if problem == "multiclass":
        return {"objective": "multi:softprob", "num_class": n_classes, "eval_metric": "mlogloss"}
    return {"objective": "reg:squarederror", "eval_metric": "mae" if metric == "mae" else "rmse"}


@cache
def _gpu_failure(index: int) -> str | None:
    """None if XGBoost trains on this CUDA device here, else why not (once per process)."""
    x = np.random.default_rng(0).random((64, 2))
    data = xgb.DMatrix(x, label=(x[:, 0] > 0.5).astype(float))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            booster = xgb.train({"device": f"cuda:{index}", "tree_method": "hist", "verbosity": 1}, data, 1)
        except xgb.core.XGBoostError as exc:
            return reason(str(exc))
    config = json.loads(booster.save_config())
    device = config.get("learner", {}).get("generic_param", {}).get("device", "cpu")
    if not str(device).startswith("cuda"):
        said = "; ".join(reason(str(w.message)) for w in caught) or "no CUDA device"
        return f"it fell back to {device}: {said}"
    return None


def reason(message: str) -> str:
    """XGBoost's own words, without the time stamp, level and source file it prefixes them with."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return re.sub(r"^(?:\[[\d:]+\] )?(?:WARNING|ERROR|INFO): \S+:\d+: ", "", first)


def choose_device(ctx: FitContext) -> tuple[dict[str, Any], str, str | None]:
    """(XGBoost device parameters, device label, note) for this fit."""
    index = ctx.cuda_index()
    if index is None:
        return {"device": "cpu"}, "cpu", None
    why = _gpu_failure(index)
    if why is None:
        return {"device": f"cuda:{index}"}, f"cuda:{index}", None
    return {"device": "cpu"}, "cpu", ctx.cpu_instead(f"XGBoost cannot use the GPU here ({why})")


class XGBModel:
    def __init__(
        self, booster: xgb.Booster, problem: str, native: list[bool], cardinalities: list[int], threads: int
    ) -> None:
        self.booster = booster
        self.problem = problem
        self.native = native
        self.cardinalities = cardinalities
        self.threads = threads  # the fit's threads in the trainer, the process's usable CPUs once loaded

    def predict(self, x: Encoded) -> np.ndarray:
        data = _matrix(x, None, self.native, self.cardinalities)
        best = self.booster.best_iteration if self.booster.attr("best_iteration") is not None else None
        rounds = (0, best + 1) if best is not None else (0, 0)
        # Models are scored on the CPU wherever they trained: the predictor serves from CPU pods.
        self.booster.set_param({"device": "cpu", "nthread": self.threads})
        return np.asarray(self.booster.predict(data, iteration_range=rounds), dtype=np.float64)

    def save(self, directory: Path) -> None:
        self.booster.save_model(str(directory / "model.ubj"))
        meta = {"native": self.native, "cardinalities": self.cardinalities}
        (directory / "xgb.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, directory: Path, problem: str) -> XGBModel:
        booster = xgb.Booster()
        booster.load_model(str(directory / "model.ubj"))
        meta = json.loads((directory / "xgb.json").read_text())
        cardinalities = [int(c) for c in meta["cardinalities"]]
        # A model saved before the level limit has one flag for every column; it must predict as it was trained.
        earlier = [bool(meta.get("categorical"))] * len(cardinalities)
        native = [bool(n) for n in meta["native"]] if "native" in meta else earlier
        return cls(booster, problem, native, cardinalities, usable_cpus())


# XGBoost's metrics that improve upwards (its own EarlyStopping's list); the rest improve downwards.
_MAXIMIZED = ("auc", "aucpr", "pre", "map", "ndcg")


class _Stopping(xgb.callback.TrainingCallback):
    """Early stopping by the patience tracker on the validation metric (XGBoost's own EarlyStopping waits a fixed
    number of rounds) and the job's deadline; the best round is kept on the booster as XGBoost's own keeps it."""

    def __init__(self, stop: Stopper | None, late: Callable[[], bool] | None) -> None:
        super().__init__()
        self.stop = stop
        self.late = late

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        """True stops training."""
        # Asked every round before anything else: in a collective fit it is a collective every rank must join.
        past = self.late is not None and self.late()
        if self.stop is not None:
            metric, values = list(evals_log["val"].items())[-1]  # XGBoost stops on the last metric too
            value = float(values[-1])
            done = self.stop.update(epoch, value, metric.split("@")[0] in _MAXIMIZED)
            if self.stop.best_round == epoch:
                model.set_attr(best_iteration=str(epoch), best_score=str(value))
            if done:
                return True
        return past


def stopping(hp: dict[str, Any], rows: int, late: Callable[[], bool] | None) -> list[xgb.callback.TrainingCallback]:
    """The fit's stopping callbacks: the patience its config asks for over ``rows`` training rows (the same on
    every rank of a collective fit), and whether the deadline has passed (agreed by every rank of a collective
    fit)."""
    stop = stopper(hp, rows)
    return [_Stopping(stop, late)] if stop is not None or late is not None else []


def fit(ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray) -> Trained | None:
    if ctx.distributed:
        from tabjob_trainer.models.xgb_collective import fit_distributed

        return fit_distributed(ctx, train, y_train, val, y_val)
    hp = families.XGB.effective(ctx.hyperparameters)
    device_params, device, note = choose_device(ctx)
    params: dict[str, Any] = {
        **{k: v for k, v in hp.items() if k not in _LOOP_KEYS},
        **objective(ctx.problem, ctx.n_classes, ctx.metric),
        **device_params,
        "tree_method": "hist",
        "nthread": max(1, ctx.threads),
        "seed": ctx.seed,
        "verbosity": 0,
    }
    # Quantised as they are built: no float copy of the rows beside the bins (a DMatrix keeps one).
    bins = int(hp.get("max_bin", 256))
    limits = level_limits(hp, ctx.cardinalities)
    kept: Way | None = None
    columns: list[str] = []
    for limit in limits:
        native = native_columns(hp, ctx.cardinalities, limit)
        dtrain = _training_matrix(train, y_train, native, ctx.cardinalities, max_bin=bins)
        dval = _training_matrix(val, y_val, native, ctx.cardinalities, ref=dtrain, max_bin=bins)
        columns = list(dtrain.feature_names or [])
        evals: dict[str, Any] = {}
        started = time.perf_counter()
        booster = xgb.train(
            params,
            dtrain,
            num_boost_round=int(hp["num_boost_round"]),
            evals=[(dval, "val")],
            evals_result=evals,
            callbacks=stopping(hp, len(y_train), deadline_check(ctx)),  # a way tried past the deadline trains a round
            verbose_eval=False,
        )
        del dtrain, dval
        metric, value = kept_score(booster, evals)
        way = Way(limit, booster, evals, value, time.perf_counter() - started)
        if kept is None or way.better_than(kept, metric.split("@")[0] in _MAXIMIZED):
            kept = way
    assert kept is not None
    native = native_columns(hp, ctx.cardinalities, kept.limit)
    kept_as, chosen = what_was_kept(limits, kept.limit, ctx.cardinalities)
    result = trained(ctx, kept.booster, params, kept.evals, columns, native, device, note, way=kept_as, chosen=chosen)
    result.kept_seconds = kept_seconds(limits, kept)
    return result


def kept_score(booster: xgb.Booster, evals: dict[str, Any]) -> tuple[str, float]:
    """(the stopping metric, its value at the round the booster keeps): the best round's where early stopping
    marked one (_Stopping), else the last round's (every round is kept)."""
    metric, values = list(evals["val"].items())[-1]
    marked = booster.attr("best_score")
    return metric, float(marked) if marked is not None else float(values[-1])


def trained(
    ctx: FitContext,
    booster: xgb.Booster,
    params: dict[str, Any],
    evals: dict[str, Any],
    columns: list[str],
    native: list[bool],
    device: str,
    note: str | None,
    extra: dict[str, Any] | None = None,
    way: str | None = None,
    chosen: dict[str, Any] | None = None,
) -> Trained:
    """A finished booster as the fit's result, whether one process or the collective's ranks trained it. ``note``:
    the device's fallback, if any; ``way``: which way of training the string columns the fit kept, where it tried
    several (level_ways.py), and ``chosen`` the settings that way stands for (its refit trains the folds' majority)."""
    metric = params["eval_metric"]
    gains = booster.get_score(importance_type="total_gain")
    best = booster.best_iteration if booster.attr("best_iteration") is not None else booster.num_boosted_rounds() - 1
    return Trained(
        model=XGBModel(booster, ctx.problem, native, list(ctx.cardinalities), max(1, ctx.threads)),
        device=device,
        fallback=note is not None,
        note="; ".join(n for n in (note, way) if n) or None,
        curve={"metric": metric, "val": [float(v) for v in evals.get("val", {}).get(metric, [])]},
        importance={f: _number(gains.get(col, 0.0)) for f, col in zip(ctx.feature_names, columns, strict=False)},
        best_iteration=int(best) + 1,
        settings_chosen=chosen or {},
        extra=extra or {},
    )


def _number(value: float | list[float]) -> float:
    # get_score gives a list only for vector leaves (multi-target trees), which tabjob does not train.
    return float(sum(value)) if isinstance(value, list) else float(value)


FAMILY = Family(facts=families.XGB, fit=fit, load=XGBModel.load)
