"""One fit over shards: each rank trains on its own rows, predicts its own validation and test rows, and the
predictions (never the rows) travel to the fit's leader, joined there by each row's index in the whole table."""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tabjob.contracts.plan import FitPlan
from tabjob_trainer.dataset import Prepared
from tabjob_trainer.models.base import FitContext, Trained
from tabjob_trainer.models.registry import family
from tabjob_trainer.preprocess import Encoded
from tabjob_trainer.record import FitRecord
from tabjob_trainer.sharded import rows as row_ids
from tabjob_trainer.sharded.collective import gather_to_leader
from tabjob_trainer.store import Outcome, npy


def predict_rows(trained: Trained, x: Encoded, problem: str, n_classes: int) -> np.ndarray:
    """Predictions for ``x``; a rank without such rows has an empty array of the right shape."""
    if len(x):
        return np.asarray(trained.model.predict(x))
    return np.empty((0, n_classes) if problem == "multiclass" else (0,), dtype=np.float64)


def reorder(data: Prepared, order: np.ndarray) -> None:
    """Permute this rank's rows in place (features a column at a time, so one column is the only copy), with their
    labels, keys and row indices."""
    shard = data.shard
    assert shard is not None
    for block in (data.x.numeric, data.x.categorical):
        for j in range(block.shape[1]):
            block[:, j] = block[order, j]
    data.y[:] = data.y[order]
    shard.keys[:] = shard.keys[order]
    shard.rows[:] = shard.rows[order]


def slice_of(x: Encoded, start: int, stop: int | None) -> Encoded:
    """Rows ``start:stop`` as views (C-contiguous: a row-range of a row-major array)."""
    return Encoded(x.numeric[start:stop], x.categorical[start:stop])


def _joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Every rank's (row index, prediction) pairs as one array ordered by row index."""
    index = np.concatenate([p[0] for p in parts])
    pred = np.concatenate([p[1] for p in parts])
    order = np.argsort(index, kind="stable")
    return index[order], pred[order]


def run_sharded(fit: FitPlan, data: Prepared, folds: int, ctx: FitContext) -> Outcome | None:
    from tabjob_trainer.fitting import _finite_list, finite_score, timed_predict

    shard = data.shard
    assert shard is not None
    train_idx, val_idx = row_ids.split(shard.keys, folds, fit.bag_set, fit.fold)
    # The rank's rows put in (training, validation) order in place: both are then slices of its arrays, which the
    # libraries read without a copy, and no second float copy of the training rows is ever made.
    n_train = len(train_idx)
    reorder(data, np.concatenate([train_idx, val_idx]))
    train_idx, val_idx = np.arange(n_train), np.arange(n_train, len(data.y))
    x_val, y_val = slice_of(data.x, n_train, None), data.y[n_train:]
    started = time.perf_counter()
    trained = family(fit.key).fit(ctx, slice_of(data.x, 0, n_train), data.y[:n_train], x_val, y_val)
    fit_time = time.perf_counter() - started
    if trained is None:
        raise RuntimeError(f"{fit.key} returned no model on rank {ctx.rank} of a sharded fit")
    problem, k = data.label.problem_type, data.n_classes
    if len(x_val):
        val_pred, pred_time = timed_predict(trained, x_val)
    else:
        val_pred, pred_time = predict_rows(trained, x_val, problem, k), 0.0
    del x_val
    test: tuple[np.ndarray, np.ndarray] | None = None
    if data.x_test is not None and shard.test_rows is not None:
        test = (shard.test_rows, predict_rows(trained, data.x_test, problem, k))
    mine = {
        "val": (shard.rows[val_idx], val_pred),
        "test": test,
        "rows": (len(train_idx), len(val_idx)),
        "pred_time": pred_time,
        "iterations": trained.best_iteration,
    }
    received = gather_to_leader(ctx, mine)
    if received is None:
        return None
    return _outcome(fit, data, trained, received, fit_time, _finite_list, finite_score)


def _outcome(
    fit: FitPlan,
    data: Prepared,
    trained: Trained,
    received: list[dict[str, Any]],
    fit_time: float,
    finite_list: Any,
    finite_score: Any,
) -> Outcome:
    shard = data.shard
    assert shard is not None and shard.y_all is not None, "the leader of a sharded fit is rank 0"
    val_rows, val_pred = _joined([r["val"] for r in received])
    score_val = finite_score(data, shard.y_all[val_rows], val_pred, "validation")
    files = {"val_idx.npy": npy(val_rows.astype(np.int64)), "val_pred.npy": npy(val_pred)}
    score_test = None
    tests = [r["test"] for r in received if r["test"] is not None]
    if tests and shard.y_test_all is not None:
        test_rows, test_pred = _joined(tests)
        files["test_pred.npy"] = npy(test_pred)
        score_test = finite_score(data, shard.y_test_all[test_rows], test_pred, "test")
    rows_train = sum(r["rows"][0] for r in received)
    rows_val = sum(r["rows"][1] for r in received)
    # The leader timed its own rows: the record's time is for the whole validation set at that pace.
    local_val = received[0]["rows"][1]
    pred_time = received[0]["pred_time"] * rows_val / local_val if local_val else 0.0
    kept_time = trained.kept_seconds or fit_time  # the kept model's own, where the fit trained several
    record = FitRecord.planned(
        fit,
        "Succeeded",
        device=trained.device,
        fallback=trained.fallback,
        note=trained.note,
        fit_time=round(fit_time, 4),
        kept_fit_time=trained.kept_seconds,
        pred_time_val=round(pred_time, 4),
        score_val=score_val,
        score_test=score_test,
        rows_train=rows_train,
        rows_val=rows_val,
        rows_per_second=round(rows_train * max(trained.best_iteration, 1) / max(kept_time, 1e-9), 1),
        best_iteration=trained.best_iteration,
        settings_chosen=trained.settings_chosen,
        curve={k: finite_list(v) if isinstance(v, list) else v for k, v in trained.curve.items()},
        importance={k: v for k, v in trained.importance.items() if math.isfinite(v)},
        extra={
            **trained.extra,
            "ranks": len(received),
            # Each rank's (training, validation) rows and where it stopped: the same iteration on every rank.
            "rankRows": [list(r["rows"]) for r in received],
            "rankIterations": [r["iterations"] for r in received],
        },
    )
    with tempfile.TemporaryDirectory() as tmp:
        trained.model.save(Path(tmp))
        files.update({p.name: p.read_bytes() for p in Path(tmp).iterdir() if p.is_file()})
    return Outcome(record, files)
