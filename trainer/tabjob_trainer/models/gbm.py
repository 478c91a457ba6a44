"""GBM: LightGBM with early stopping, device from the fit's resources, data-parallel over ranks.

Device choice for a GPU fit: LightGBM's CUDA learner where the build has it, else the OpenCL ``gpu`` learner,
else an error -- or the CPU when the spec says onGpuUnavailable: FallbackToCPU, recorded on the result, never
silent. A fit with processes > 1 uses LightGBM's own socket data-parallel learner (CPU only) with ``pre_partition``:
each rank trains on its share of the rows, and the bins come from LightGBM's distributed bin finding. Read sharded
(docs/sharding.md), a rank's share is its shard and its validation rows are its own: the stopping metric is then
reduced over the ranks each round (LightGBM scores each machine alone), so all ranks stop on the same iteration.
Otherwise every rank holds every row, trains on a slice of them and validates on the whole validation set.

Categorical columns are split on as sets of levels (LightGBM's own categorical handling) up to
``max_native_levels`` levels (32, as XGB's); a column with more is split on its ordinal codes. A set split over
hundreds of levels of a few rows each can fit noise (flights' tail numbers: 0.689 against 0.703 AUC out of fold), but
LightGBM smooths its set splits and the limit lost on three of the seven tables with such a column (gapminder's 185
countries: 1.15 rmse out of fold as sets, 1.33 as codes). So with ``compare_native_levels`` (the default) a fit
trains its string columns each way that differs (the limit's, every one as sets, every one as codes), keeps the one
with the best stopping metric on its validation rows (the rows its early stopping already reads; every rank sees
the same value, so every rank keeps the same way), and records it in ``settings_chosen`` for its refit
(BENCHMARKS.md, "LightGBM's categorical columns"). ``GBM_Plain`` (``max_native_levels: 0``, no comparing) is
LightGBM's defaults on the plain matrix, every column a number: the floor the benchmarks measure.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np

from tabjob import families
from tabjob.contracts import pod
from tabjob.families.tree_loop import COMPARE_LEVELS
from tabjob_trainer.models.base import Family, FitContext, Trained, usable_cpus
from tabjob_trainer.models.level_ways import Way, kept_seconds, what_was_kept
from tabjob_trainer.models.patience import Stopper, deadline_check, fit_rows, stopper
from tabjob_trainer.preprocess import Encoded
from tabjob_trainer.sharded.metrics import higher_is_better

# Not passed to LightGBM as parameters; they steer the training loop.
_LOOP_KEYS = tuple(families.GBM.loop_settings)
# Only one data-parallel fit per process: LightGBM keeps its network in process-wide state.
_NETWORK_LOCK = threading.Lock()
_PROBED: dict[str, str | None] = {}
_SAMPLE_ROWS = 200_000  # LightGBM's bin_construct_sample_cnt default


def to_matrix(x: Encoded) -> np.ndarray:
    cat = x.categorical.astype(np.float32)
    cat[cat < 0] = np.nan  # unknown and missing categories: LightGBM's missing-value branch
    return np.hstack([x.numeric, cat]) if cat.size else x.numeric


def objective(problem: str, n_classes: int) -> dict[str, Any]:
    if problem == "binary":
        return {"objective": "binary"}
    if problem == "multiclass":
        return {"objective": "multiclass", "num_class": n_classes}
    return {"objective": "regression"}


def stopping_metric(metric: str, problem: str) -> str:
    """LightGBM's built-in metric closest to the eval metric; log-loss where a smooth one is better.

    Accuracy stops on the error itself, as AutoGluon's LightGBM stops on the eval metric: on imbalanced multiclass
    tables of a few thousand rows the log-loss peaks long before the error does, and fold models stopped there
    (about 80 rounds at the defaults' 0.05) fell more than a point of accuracy below a default LightGBM on all rows
    (BENCHMARKS.md, "The floor and the refit": the mechanism, on proxies)."""
    if metric == "roc_auc" and problem == "binary":
        return "auc"
    if problem == "regression":
        return "l1" if metric == "mae" else "rmse"
    if metric == "accuracy":
        return "binary_error" if problem == "binary" else "multi_error"
    return "binary_logloss" if problem == "binary" else "multi_logloss"


# The error moves in steps and plateaus for long stretches: stopping on it needs more patience than a smooth loss
# (the measured variant stopped on the error after 300 rounds without a gain).
ERROR_PATIENCE = 300


# Run in a child process: where the build has CUDA but no device is visible, LightGBM's CUDA learner does not
# raise, it ends its process (std::terminate from a destructor, SIGABRT), and that process would be the rank.
_PROBE = """
import sys
import lightgbm as lgb
import numpy as np
x = np.random.default_rng(0).random((64, 2))
params = {"device_type": sys.argv[1], "gpu_device_id": int(sys.argv[2]), "verbose": -1, "objective": "binary"}
try:
    lgb.train(params, lgb.Dataset(x, (x[:, 0] > 0.5).astype(np.float64)), num_boost_round=1)
except lgb.basic.LightGBMError as exc:
    sys.exit(str(exc).strip().splitlines()[0])
"""


def _probe(device_type: str, index: int) -> str | None:
    """None if LightGBM can train on this device here, else why not (cached per process)."""
    key = f"{device_type}:{index}"
    if key not in _PROBED:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, device_type, str(index)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        _PROBED[key] = None if proc.returncode == 0 else probe_failure(proc.returncode, proc.stderr)
    return _PROBED[key]


def probe_failure(returncode: int, stderr: str) -> str:
    """The reason a probe gives: LightGBM's own fatal message, without the source file it was raised in."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    fatal = [line.split("[Fatal]", 1)[1].strip() for line in lines if "[Fatal]" in line]
    reason = fatal[0] if fatal else (lines[-1] if lines else "no message")
    reason = re.sub(r"\s+\S+\.(?:cpp|cu|h|hpp) \d+$", "", reason)
    if returncode < 0:
        reason += f" (the probe was killed by signal {-returncode})"
    return reason


def choose_device(ctx: FitContext) -> tuple[dict[str, Any], str, str | None]:
    """(LightGBM device parameters, device label, note) for this fit."""
    index = ctx.cuda_index()
    if index is None:
        return {"device_type": "cpu"}, "cpu", None
    reasons = []
    for device_type, label in (("cuda", f"cuda:{index}"), ("gpu", f"gpu:{index}")):
        why = _probe(device_type, index)
        if why is None:
            return {"device_type": device_type, "gpu_device_id": index}, label, None
        reasons.append(f"{device_type}: {why}")
    note = ctx.cpu_instead("LightGBM cannot use the GPU here (" + "; ".join(reasons) + ")")
    return {"device_type": "cpu"}, "cpu", note


class GBMModel:
    def __init__(self, booster: lgb.Booster, problem: str, threads: int) -> None:
        self.booster = booster
        self.problem = problem
        self.threads = threads  # the fit's threads in the trainer, the process's usable CPUs once loaded

    def predict(self, x: Encoded) -> np.ndarray:
        best = self.booster.best_iteration or None
        return np.asarray(self.booster.predict(to_matrix(x), num_iteration=best, num_threads=self.threads))

    def save(self, directory: Path) -> None:
        (directory / "model.txt").write_text(self.booster.model_to_string())

    @classmethod
    def load(cls, directory: Path, problem: str) -> GBMModel:
        return cls(lgb.Booster(model_str=(directory / "model.txt").read_text()), problem, usable_cpus())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _my_address() -> str:
    # Pods get POD_IP from the downward API; on one machine (tabjob run) every rank is local.
    return pod.POD_IP.get() or "127.0.0.1"


def _network_params(ctx: FitContext) -> dict[str, Any]:
    import torch.distributed as dist

    port = _free_port()
    everyone: list[Any] = [None] * len(ctx.ranks)
    dist.all_gather_object(everyone, (_my_address(), port), group=ctx.group)
    return {
        "tree_learner": "data",
        "num_machines": len(ctx.ranks),
        "machines": ",".join(f"{host}:{p}" for host, p in everyone),
        "local_listen_port": port,
        "pre_partition": True,
        "time_out": 10,
    }


def native_columns(limit: int, n_numeric: int, cardinalities: list[int]) -> list[int]:
    """The matrix columns LightGBM splits on as sets of levels: the categorical ones with at most ``limit`` levels
    (a ``max_native_levels``); the others it splits as ordinal codes, as it does every column of a plain matrix."""
    return [n_numeric + i for i, c in enumerate(cardinalities) if c <= limit]


def level_limits(hp: dict[str, Any], cardinalities: list[int]) -> list[int]:
    """The ``max_native_levels`` a fit trains with, the config's first: with ``compare_native_levels`` also every
    string column as sets and every one as codes, each only where it splits some column another way than those
    before it (a column of two levels splits the same either way)."""
    limit = int(hp["max_native_levels"])
    if not hp[COMPARE_LEVELS] or not cardinalities:
        return [limit]
    limits: list[int] = []
    seen: set[tuple[int, ...]] = set()
    for candidate in (limit, max(cardinalities), 0):
        native = native_columns(candidate, 0, cardinalities)
        columns = tuple(i for i in native if cardinalities[i] > 2)
        if columns not in seen:
            seen.add(columns)
            limits.append(candidate)
    return limits


def fit(ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray) -> Trained | None:
    hp = families.GBM.effective(ctx.hyperparameters)
    rounds = int(hp["num_boost_round"])
    metric_name = stopping_metric(ctx.metric, ctx.problem)
    device_params, device, note = choose_device(ctx)
    params: dict[str, Any] = {
        **{k: v for k, v in hp.items() if k not in _LOOP_KEYS},
        **objective(ctx.problem, ctx.n_classes),
        **device_params,
        "metric": metric_name,
        "num_threads": max(1, ctx.threads),
        "seed": ctx.seed,
        "verbose": -1,
        "deterministic": True,
    }
    # Every fit of a table with string columns knows their levels: a missing count would turn a column to codes.
    assert len(ctx.cardinalities) == train.categorical.shape[1], "cardinalities must cover every string column"
    n_numeric = train.numeric.shape[1]
    rows = fit_rows(ctx, len(y_train))
    if ctx.distributed:
        if device != "cpu":
            raise ValueError("GBM processes > 1 trains on the CPU only (LightGBM's CUDA learner is single-device)")
        if not ctx.sharded:  # every rank holds every row: each trains on its own slice of them
            position = ctx.ranks.index(ctx.rank)
            mine = np.arange(position, len(y_train), len(ctx.ranks))
            train, y_train = train.take(mine), y_train[mine]
    x_train, x_val = to_matrix(train), to_matrix(val)
    del train, val  # to_matrix keeps the numeric block itself where there are no categories
    feval = None
    if ctx.sharded and ctx.distributed:
        # LightGBM scores each machine's validation rows alone: the metric is reduced over the ranks instead, so
        # every rank sees the whole validation set's and stops on the same iteration (and keeps the same way).
        feval = _reduced_metric(params["metric"], ctx)
        params["metric"] = "None"
        # Each machine finds the bins of its share of the columns from its own sample: the ranks' samples add up to
        # the one process's 200,000 rows (LightGBM's default), not that many each.
        if not {"bin_construct_sample_cnt", "subsample_for_bin"} & params.keys():
            params["bin_construct_sample_cnt"] = -(-_SAMPLE_ROWS // len(ctx.ranks))
    limits = level_limits(hp, ctx.cardinalities)
    kept: Way | None = None
    for limit in limits:
        evals: dict[str, Any] = {}
        callbacks: list[Any] = [lgb.record_evaluation(evals)]
        # Stopping none (early_stopping_rounds 0) trains every round, as a plain LightGBM estimator does.
        stop = stopper(hp, rows, at_least=ERROR_PATIENCE if metric_name.endswith("_error") else 0)
        late = deadline_check(ctx)  # a way tried after the fit's deadline trains a round and loses
        if stop is not None or late is not None:
            callbacks.append(_stopping_callback(stop, late))
        cat_idx = native_columns(limit, n_numeric, ctx.cardinalities)
        started = time.perf_counter()
        with _NETWORK_LOCK if ctx.distributed else contextlib.nullcontext():
            if ctx.distributed:
                params.update(_network_params(ctx))
            dtrain = lgb.Dataset(x_train, y_train, categorical_feature=cat_idx or "auto", free_raw_data=True)
            dval = lgb.Dataset(x_val, y_val, reference=dtrain)
            booster = lgb.train(
                params,
                dtrain,
                num_boost_round=rounds,
                valid_sets=[dval],
                valid_names=["val"],
                feval=feval,
                callbacks=callbacks,
            )
            if ctx.distributed:
                booster.free_network()
        del dtrain, dval
        # The metric at the round the booster keeps: the same on every rank (whole or reduced validation rows).
        way = Way(limit, booster, evals, float(booster.best_score["val"][metric_name]), time.perf_counter() - started)
        if kept is None or way.better_than(kept, higher_is_better(metric_name)):
            kept = way
    assert kept is not None
    booster, limit = kept.booster, kept.limit
    if not ctx.returns_model:
        return None
    gains = booster.feature_importance("gain")
    kept_as, chosen = what_was_kept(limits, limit, ctx.cardinalities)
    notes = [n for n in (note, kept_as) if n]
    return Trained(
        model=GBMModel(booster, ctx.problem, max(1, ctx.threads)),
        device=device,
        fallback=note is not None,  # choose_device notes only a fallback
        note="; ".join(notes) or None,
        curve={"metric": metric_name, "val": [float(v) for v in kept.evals.get("val", {}).get(metric_name, [])]},
        importance={n: float(g) for n, g in zip(ctx.feature_names, gains, strict=False)},
        best_iteration=int(booster.best_iteration or booster.current_iteration()),
        settings_chosen=chosen,
        kept_seconds=kept_seconds(limits, kept),
    )


def _reduced_metric(name: str, ctx: FitContext) -> Any:
    from tabjob_trainer.sharded.collective import group_sum
    from tabjob_trainer.sharded.metrics import reduced

    reduce = group_sum(ctx)

    def feval(pred: np.ndarray, data: lgb.Dataset) -> tuple[str, float, bool]:
        return name, reduced(name, np.asarray(data.get_label()), pred, reduce), higher_is_better(name)

    return feval


def _stopping_callback(stop: Stopper | None, late: Callable[[], bool] | None) -> Any:
    """Early stopping by ``stop`` on the validation set's metric, and the deadline's stop; either keeps the best
    round so far (the deadline alone, with no stopping asked for, keeps the last)."""
    best: list[Any] = []

    def callback(env: Any) -> None:
        result = env.evaluation_result_list
        # Asked every round before anything else: over several ranks it is a collective every rank must join.
        past = late is not None and late()
        if stop is not None:
            _, _, value, higher_is_better, *_ = result[0]
            done = stop.update(env.iteration, float(value), bool(higher_is_better))
            if stop.best_round == env.iteration:
                best[:] = [list(result)]
            last = env.iteration == env.end_iteration - 1
            if done or last or past:
                raise lgb.callback.EarlyStopException(stop.best_round, best[0])
        elif past:
            raise lgb.callback.EarlyStopException(env.iteration, result)

    callback.order = 30  # type: ignore[attr-defined]  # where LightGBM's own early_stopping runs
    return callback


FAMILY = Family(facts=families.GBM, fit=fit, load=GBMModel.load)
