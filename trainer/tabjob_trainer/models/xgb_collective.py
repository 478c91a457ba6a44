"""XGB data-parallel: XGBoost's own collective over the fit's ranks, as Kubeflow's XGBoost runtime runs it.

The fit's first rank starts XGBoost's tracker (``RabitTracker``, on its pod's address) and hands the workers' arguments
to the other ranks over the job's process group; every rank joins the communicator with its place in the fit as its
task id, so the collective's ranks are the fit's. Each rank builds a ``QuantileDMatrix`` of its own rows: the
quantile sketches are merged in the collective, so every rank bins alike, and the histograms are all-reduced every
round. XGBoost all-reduces the evaluation metrics too, so every rank sees the whole validation set's and early
stopping ends every rank on the same round. On GPUs each rank trains on its own device (``device=cuda:N``) and the
collective runs over NCCL.

Read sharded (docs/sharding.md) a rank's rows are its shard; otherwise every rank holds every row and trains on its
slice of them, validating on all of the validation rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import xgboost as xgb

from tabjob import families
from tabjob.contracts import pod
from tabjob_trainer.models.base import FitContext, Trained
from tabjob_trainer.models.patience import deadline_check, fit_rows
from tabjob_trainer.models.xgb import _LOOP_KEYS, choose_device, native_columns, objective, stopping, to_frame, trained
from tabjob_trainer.preprocess import Encoded


def _address() -> str:
    return pod.POD_IP.get() or "127.0.0.1"


@contextlib.contextmanager
def collective(ctx: FitContext) -> Iterator[None]:
    """XGBoost's communicator over the fit's ranks, its tracker on the first."""
    from tabjob_trainer.sharded.collective import broadcast_from_leader

    tracker = None
    args: dict[str, Any] | None = None
    if ctx.leader:
        from xgboost.tracker import RabitTracker

        tracker = RabitTracker(n_workers=len(ctx.ranks), host_ip=_address(), sortby="task")
        tracker.start()
        args = dict(tracker.worker_args())
    args = dict(broadcast_from_leader(ctx, args))
    args["dmlc_task_id"] = f"{ctx.ranks.index(ctx.rank):06d}"
    try:
        with xgb.collective.CommunicatorContext(**args):
            yield
    finally:
        if tracker is not None:
            tracker.wait_for()
            tracker.free()


def data_of(x: Encoded, native: list[bool], cardinalities: list[int]) -> np.ndarray | pd.DataFrame:
    """What the matrix is built from: the numeric block itself where there are no category columns (no copy), else
    the same frame the model predicts from."""
    if x.categorical.shape[1] == 0:
        return x.numeric
    return to_frame(x, native, cardinalities)


def names(x: Encoded) -> list[str]:
    return [f"n{i}" for i in range(x.numeric.shape[1])] + [f"c{i}" for i in range(x.categorical.shape[1])]


def fit_distributed(
    ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray
) -> Trained | None:
    hp = families.XGB.effective(ctx.hyperparameters)
    native = native_columns(hp, ctx.cardinalities)
    device_params, device, note = choose_device(ctx)
    rows = fit_rows(ctx, len(y_train))
    if not ctx.sharded:  # every rank holds every row: each trains on its own slice of them
        mine = np.arange(ctx.ranks.index(ctx.rank), len(y_train), len(ctx.ranks))
        train, y_train = train.take(mine), y_train[mine]
    params: dict[str, Any] = {
        **{k: v for k, v in hp.items() if k not in _LOOP_KEYS},
        **objective(ctx.problem, ctx.n_classes, ctx.metric),
        **device_params,
        "tree_method": "hist",
        "nthread": max(1, ctx.threads),
        "seed": ctx.seed,
        "verbosity": 0,
    }
    evals: dict[str, Any] = {}
    # The ranks agree on the deadline each round (their clocks could differ), as on the allreduced metric.
    callbacks = stopping(hp, rows, deadline_check(ctx))
    with collective(ctx):
        columns = names(train)
        enable = any(native)  # a native column is a categorical one
        dtrain = xgb.QuantileDMatrix(
            data_of(train, native, ctx.cardinalities),
            label=y_train,
            feature_names=columns,
            enable_categorical=enable,
            missing=np.nan,
            max_bin=int(hp.get("max_bin", 256)),
        )
        del train
        dval = xgb.QuantileDMatrix(
            data_of(val, native, ctx.cardinalities),
            label=y_val,
            feature_names=columns,
            enable_categorical=enable,
            missing=np.nan,
            ref=dtrain,
            max_bin=int(hp.get("max_bin", 256)),
        )
        booster = xgb.train(
            params,
            dtrain,
            num_boost_round=int(hp["num_boost_round"]),
            evals=[(dval, "val")],
            evals_result=evals,
            callbacks=callbacks,
            verbose_eval=False,
        )
    if not ctx.returns_model:
        return None
    return trained(ctx, booster, params, evals, columns, native, device, note, {"world": len(ctx.ranks)})
