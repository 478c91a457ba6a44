"""Rank 0's last step: fit records -> models -> weighted ensemble -> leaderboard, metrics and model index.

``assemble`` is pure over records and arrays; ``write_results`` puts the contract files in the output directory.
"""

from __future__ import annotations

import csv
import io
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from tabjob.contracts.plan import Plan
from tabjob.contracts.results import LEADERBOARD_COLUMNS, ModelResult, RunSummary, round_or_none
from tabjob_trainer import store
from tabjob_trainer.bagging import BaggedModel, combine, expected_fits, group_fits, model_name
from tabjob_trainer.dataset import Prepared
from tabjob_trainer.durable import atomic_write, write_json
from tabjob_trainer.ensemble import blend, select, selection_metric
from tabjob_trainer.metrics import score
from tabjob_trainer.post_base import refit_reserve
from tabjob_trainer.record import FitRecord
from tabjob_trainer.refit import ENSEMBLE_KEY, add_refits
from tabjob_trainer.stacking import STACK_KEY, add_stack

ENSEMBLE = "WeightedEnsemble"
# What write_results leaves in the output directory (leaderboard.json last: it marks the run finished).
RESULT_FILES = ("error.json", "leaderboard.json", "leaderboard.csv", "models.json", "metrics.json")


def build_models(plan: Plan, data: Prepared, out: Path, records: dict[str, FitRecord]) -> list[BaggedModel]:
    trials = {c.name: 0 for c in plan.configs}
    for planned_fit in plan.fits:
        trials[planned_fit.model] = max(trials[planned_fit.model], planned_fit.trial + 1)
    planned = {p.id for p in plan.fits}
    recs = [r for fid, r in records.items() if fid in planned]
    by_model = group_fits(recs)
    models = []
    for key, n in expected_fits(plan).items():
        fits = by_model.get(key, [])
        arrays: dict[str, dict[str, np.ndarray]] = {}
        for rec in fits:
            if rec.succeeded:
                arrays[rec.id] = {
                    name: a
                    for name in ("val_idx", "val_pred", "test_pred")
                    if (a := store.array(out, rec.id, name)) is not None
                }
        order, config, trial = key
        name = model_name(config, trial, trials[config])
        if not fits:
            models.append(
                BaggedModel(name, config, "", order, trial, [], state="Failed", message="no fit of this model finished")
            )
            continue
        models.append(combine(name, sorted(fits, key=lambda r: r.id), arrays, len(data.y), n))
    return models


def _score(data: Prepared, y: np.ndarray, pred: np.ndarray) -> float:
    return score(data.metric, data.label.problem_type, y, pred, data.n_classes)


def within(cost: float | None, limit: float | None) -> bool:
    """A model may be deployed under the plan's inference cap (an unmeasured cost never passes a cap)."""
    return limit is None or (cost is not None and cost <= limit)


def add_ensemble(
    models: list[BaggedModel], data: Prepared, size: int, limit: float | None = None
) -> BaggedModel | None:
    """Caruana over the models that finished, on the rows every one of them has validation predictions for; with an
    inference cap, over the models under it, with members whose costs add up to at most the cap."""
    ok = [
        m
        for m in models
        if m.state == "Succeeded"
        and m.val_pred is not None
        and m.val_rows is not None
        and within(m.predict_ms_per_1000_rows, limit)
    ]
    if size <= 0 or len(ok) < 1:
        return None
    rows = ok[0].val_rows
    assert rows is not None
    for m in ok[1:]:
        rows = np.intersect1d(rows, m.val_rows)  # type: ignore[arg-type]
    if len(rows) == 0:
        return None
    preds = [m.val_pred[np.searchsorted(m.val_rows, rows)] for m in ok]  # type: ignore[index,arg-type]
    y = data.y[rows]
    started = time.perf_counter()
    costs = [float(m.predict_ms_per_1000_rows or 0.0) for m in ok] if limit is not None else None
    chosen_on = selection_metric(data.metric, data.label.problem_type)
    ok_sorted, w = select(
        preds, lambda p: score(chosen_on, data.label.problem_type, y, p, data.n_classes), size, costs, limit
    )
    members = [ok[i] for i in ok_sorted]
    ens = BaggedModel(ENSEMBLE, ENSEMBLE, "ENSEMBLE", len(models), 0, [])
    ens.val_rows = rows
    if chosen_on != data.metric:
        ens.message = f"members and weights chosen on {chosen_on}; deployed ahead of any one model"
    ens.val_pred = blend([preds[i] for i in ok_sorted], w)
    tests = [m.test_pred for m in members]
    if all(t is not None for t in tests):
        ens.test_pred = blend(tests, w)  # type: ignore[arg-type]
    ens.extra = {
        "weights": {m.name: wi for m, wi in zip(members, w, strict=True) if wi > 0},
        "fitTime": time.perf_counter() - started,
        "predTimeVal": sum(m.pred_time_val for m, wi in zip(members, w, strict=True) if wi > 0),
        # The ensemble runs every member it weighs; blending them is noise beside that.
        "predictMsPer1000Rows": _sum_or_none(
            [m.predict_ms_per_1000_rows for m, wi in zip(members, w, strict=True) if wi > 0]
        ),
    }
    return ens


def _sum_or_none(costs: list[float | None]) -> float | None:
    return None if not costs or any(c is None for c in costs) else float(sum(c for c in costs if c is not None))


def rows_for(
    models: list[BaggedModel], ensemble: BaggedModel | None, data: Prepared, limit: float | None = None
) -> list[dict[str, Any]]:
    rows = []
    has_test = data.y_test is not None
    order: dict[str, int] = {}  # ties on score_val: a refit the guard chose above its bag, one it did not below
    for m in models + ([ensemble] if ensemble else []):
        row: dict[str, Any] = {"model": m.name, "score_val": None, "eval_metric": data.metric}
        if has_test:
            row["score_test"] = None
        refit = bool(m.extra.get("refit"))
        if refit:
            order[m.name] = -1 if m.extra.get("deployed") else 0 if m.extra["preferred"] else 2
        if m.state == "Succeeded" and (refit or (m.val_pred is not None and m.val_rows is not None)):
            # A refit has no held-out rows of its own: its score_val is its bag's (the guard's verdict is its note).
            row["score_val"] = m.extra["scoreVal"] if refit else _score(data, data.y[m.val_rows], m.val_pred)  # type: ignore[arg-type]
            if has_test and m.test_pred is not None:
                row["score_test"] = _score(data, data.y_test, m.test_pred)  # type: ignore[arg-type]
            if not all(math.isfinite(v) for v in (row["score_val"], row.get("score_test", 0.0)) if v is not None):
                # Fits are checked one by one; this guards the combination, so no NaN is ever ranked or reported.
                m.state, m.message = "Failed", f"NonFiniteError: the combined score is {row['score_val']}"
                row["score_val"] = None
                if has_test:
                    row["score_test"] = None
        is_ens = m is ensemble or m.key == ENSEMBLE_KEY
        derived = is_ens or m.key == STACK_KEY or refit  # no fit records of their own: timings kept in extra
        notes = sorted({f.note for f in m.fits if f.note})
        row.update(
            {
                "pred_time_val": round(m.extra.get("predTimeVal", 0.0) if derived else m.pred_time_val, 4),
                "predict_ms_per_1000_rows": round_or_none(
                    m.extra.get("predictMsPer1000Rows") if derived else m.predict_ms_per_1000_rows, 3
                ),
                "fit_time": round(m.extra.get("fitTime", 0.0) if derived else m.fit_time, 4),
                "fit_order": m.order + 1,
                "device": "" if is_ens else (m.extra.get("device", "cpu") if derived else m.devices),
                "gpus": 0.0 if is_ens else max((f.gpus for f in m.fits), default=0.0),
                "rank": 0 if is_ens else min((f.rank for f in m.fits), default=0),
                "state": m.state,
                "fallback": m.fallback,
                "note": m.message or "; ".join(notes),
            }
        )
        if is_ens:
            row["weights"] = m.extra["weights"]
        if not within(row["predict_ms_per_1000_rows"], limit) and row["score_val"] is not None:
            cap = f"over inferLimitMsPer1000Rows {limit:g} ({row['predict_ms_per_1000_rows']} ms): never deployed"
            row["note"] = "; ".join(n for n in (row["note"], cap) if n)
        rows.append(row)
    # Best first by score_val, the models under the inference cap before the others (rows[0] is what is deployed);
    # models without a score (failed, skipped) at the end.
    rows.sort(
        key=lambda r: (
            r["score_val"] is None,
            not within(r["predict_ms_per_1000_rows"], limit),
            order.get(r["model"], 1) >= 0,  # the refit the guard deployed, whatever its bag's score
            r["model"] != ENSEMBLE,  # then the ensemble: a classifier's is chosen on the log-loss, not score_val
            -(r["score_val"] or 0.0),
            order.get(r["model"], 1),
            r["fit_order"],
        )
    )
    return rows


def model_index(models: list[BaggedModel], ensemble: BaggedModel | None) -> dict[str, Any]:
    """What the predictor needs: each model's fit directories, the ensemble's weights."""
    index: dict[str, Any] = {}
    for m in models:
        if m.state == "Succeeded":
            index[m.name] = m.extra["index"] if "index" in m.extra else {"key": m.key, "fits": [f.id for f in m.fits]}
    if ensemble is not None:
        index[ENSEMBLE] = {"key": "ENSEMBLE", "weights": ensemble.extra["weights"]}
    return index


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    columns = [c for c in LEADERBOARD_COLUMNS if any(c in r for r in rows)]
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    return buf.getvalue()


def write_results(
    out: Path, plan: Plan, data: Prepared, records: dict[str, FitRecord], wall: float, deadline: float | None = None
) -> RunSummary:
    """Write oof/, models.json, metrics.json, leaderboard.csv and last leaderboard.json; return the summary.

    leaderboard.json is what marks a run finished (predict and report look for it), so it goes last: a run
    killed while writing its results is never taken for a finished one.
    """
    models = build_models(plan, data, out, records)
    kept = refit_reserve(plan, list(records.values()), len(data.y))  # the refit's time, sized from its bags
    stack_deadline = deadline - kept if deadline is not None else None
    stack = add_stack(out, plan, data, models, stack_deadline)  # plan.stacking: rank 0 trains it on the base models
    if stack is not None:
        models.append(stack)  # a used stack joins the ensemble's pool; a skipped one is a row saying why
    limit = plan.infer_limit_ms_per1000_rows
    ensemble = add_ensemble(models, data, plan.ensemble_size, limit)
    rows = rows_for(models, ensemble, data, limit)
    deployed = next(
        (r["model"] for r in rows if r["score_val"] is not None and within(r["predict_ms_per_1000_rows"], limit)), None
    )
    refits = add_refits(out, plan, data, models, ensemble, deployed, deadline)  # plan.refit: rank 0, last
    if refits:
        models += refits
        rows = rows_for(models, ensemble, data, limit)
    oof = out / "oof"
    oof.mkdir(exist_ok=True)
    for m in models + ([ensemble] if ensemble else []):
        if m.val_pred is not None and m.val_rows is not None:
            atomic_write(oof / f"{m.name.replace('/', '_')}.npy", store.npy(m.val_pred))
            atomic_write(oof / f"{m.name.replace('/', '_')}.rows.npy", store.npy(m.val_rows))
    summary = run_summary(plan, data.metric, records, rows)
    write_json(out / "models.json", model_index(models, ensemble))
    metrics = {**summary.model_dump(by_alias=True, exclude_none=True), "wallSeconds": round(wall, 3)}
    write_json(out / "metrics.json", {**metrics, "problemType": data.label.problem_type})
    atomic_write(out / "leaderboard.csv", to_csv(rows).encode())
    write_json(out / "leaderboard.json", rows)
    return summary


def run_summary(plan: Plan, metric: str, records: dict[str, FitRecord], rows: list[dict[str, Any]]) -> RunSummary:
    """The typed summary the operator reads (results.RunSummary), from the leaderboard rows (pure)."""
    states = [rec.state if (rec := records.get(f.id)) else None for f in plan.fits]
    limit = plan.infer_limit_ms_per1000_rows
    scored = [r for r in rows if r["score_val"] is not None]
    best = next((r for r in scored if within(r["predict_ms_per_1000_rows"], limit)), None)
    error = None
    if scored and best is None:
        cheapest = min((r["predict_ms_per_1000_rows"] for r in scored if r["predict_ms_per_1000_rows"] is not None),
                       default=None)  # fmt: skip
        error = (
            f"no model predicts within inferLimitMsPer1000Rows {limit:g}: the cheapest takes {cheapest} ms per 1,000 "
            "rows; raise the limit or train cheaper models"
        )
    return RunSummary(
        error=error,
        error_reason="InferLimit" if error else None,
        best_model=best["model"] if best else None,
        score=best["score_val"] if best else None,
        score_test=best.get("score_test") if best else None,
        eval_metric=metric,
        fits_total=len(plan.fits),
        fits_done=states.count("Succeeded"),
        fits_failed=states.count("Failed"),
        fits_skipped=states.count("Skipped"),
        fallbacks=sum(1 for r in rows if r["fallback"]),  # models with a fold trained on the CPU instead of a GPU
        models=[ModelResult.from_row(r) for r in rows],
    )
