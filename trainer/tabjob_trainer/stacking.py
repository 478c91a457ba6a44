"""The stack layer: a LightGBM bag over the original features and the best base models' out-of-fold predictions.

Rank 0 trains it once every base model is done (``plan.stacking``), in AutoGluon's way with its guard against
stacked overfitting (dynamic stacking): a stack trained on out-of-fold predictions can look better on its own
out-of-fold rows than it is, so first a holdout decides. The holdout rows (``holdoutFraction`` of the training rows,
stratified, never chosen by a model) are set aside; the base models' weighted ensemble is chosen on the other rows
and a stack bag is trained on them; both then predict the holdout rows out of fold (one model each, as every base
prediction is), and the stack is used only if it scores higher there. Cheaper than AutoGluon's guard, which trains
the whole first layer again without the holdout: here the base models are not refit, so their out-of-fold
predictions for the other rows come from models that saw the holdout's labels; the guard still sees every way the
stack itself overfits.

A used stack is trained again on every row with the base models' folds, goes on the leaderboard as ``Stack_L2``
beside them and joins the weighted ensemble's pool; one the guard turns down is a skipped row saying why.
Predicting with it (``Predictor``) runs its base models and then its own fold models.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from tabjob.contracts.plan import Plan, StackPlan
from tabjob_trainer import store
from tabjob_trainer.bagging import BaggedModel
from tabjob_trainer.dataset import Prepared
from tabjob_trainer.durable import atomic_write
from tabjob_trainer.ensemble import blend, select, selection_metric
from tabjob_trainer.fitting import timed_predict
from tabjob_trainer.metrics import score
from tabjob_trainer.models.base import FitContext, Model
from tabjob_trainer.models.registry import family
from tabjob_trainer.preprocess import Encoded
from tabjob_trainer.splits import kfold

STACK = "Stack_L2"
STACK_KEY = "STACK"
STACKER = "GBM"  # the family the stack trains, with its default config (AutoGluon's GBM)
FIT_PREFIX = "stack"  # its fold models live in fits/stack/<id>: no record there, so never taken for a base fit
MIN_HOLDOUT_ROWS = 10  # fewer, and the guard's verdict is a coin flip
GUARD_SEED = 7  # any fixed seed: the holdout must not be one of the base models' folds


def features(preds: list[np.ndarray]) -> np.ndarray:
    """The stack's extra columns: each base model's prediction (binary: P(second class); multiclass: one column
    per class; regression: the value), side by side."""
    return np.hstack([p.reshape(len(p), -1) for p in preds]).astype(np.float32)


def augment(x: Encoded, extra: np.ndarray) -> Encoded:
    return Encoded(np.hstack([x.numeric, extra]).astype(np.float32), x.categorical)


@dataclass
class StackBag:
    """A stack's fold models and their out-of-fold predictions."""

    models: list[Model]
    oof: np.ndarray  # every row's prediction by the one fold model that did not train on it
    predict_seconds: float  # predicting its own out-of-fold rows, all folds together

    def predict(self, x: Encoded) -> np.ndarray:
        return np.asarray(np.mean([m.predict(x) for m in self.models], axis=0))


@dataclass(frozen=True)
class Guard:
    """The holdout's verdict: the stack's and the base ensemble's scores on rows neither was chosen on."""

    rows: int
    stack_score: float
    ensemble_score: float
    metric: str

    @property
    def used(self) -> bool:
        return self.stack_score > self.ensemble_score  # a tie keeps the simpler model

    def __str__(self) -> str:
        verdict = (
            "used" if self.used else "not used (no better than the base models' ensemble on rows neither chose on)"
        )
        return (
            f"guard on {self.rows} held-out rows: stack {self.metric} {self.stack_score:.4f}, base models' weighted "
            f"ensemble {self.ensemble_score:.4f}: {verdict}"
        )


class Stacker:
    """Trains stack bags for one run: the data, the plan's folds, the fit's thread count and deadline."""

    def __init__(self, data: Prepared, folds: int, threads: int, deadline: float | None) -> None:
        self.data, self.folds, self.threads, self.deadline = data, folds, threads, deadline

    def _score(self, rows: np.ndarray, pred: np.ndarray, metric: str | None = None) -> float:
        d = self.data
        return score(metric or d.metric, d.label.problem_type, d.y[rows], pred, d.n_classes)

    def bag(self, x: Encoded, rows: np.ndarray) -> StackBag:
        """A bag over the base models' own folds, trained on ``rows`` only: fold k's model learns from ``rows``
        outside fold k, stops early on ``rows`` inside it, and predicts every row of fold k, so each row, in
        ``rows`` or not, gets one out-of-fold prediction from one model, as the base models' rows do."""
        d, problem = self.data, self.data.label.problem_type
        fit = family(STACKER).fit
        mine = np.zeros(len(d.y), dtype=bool)
        mine[rows] = True
        models: list[Model] = []
        oof: np.ndarray | None = None
        predict_seconds = 0.0
        for fold in range(self.folds):
            train, val = kfold(d.y, problem, self.folds, 0, fold)
            stop = val[mine[val]]
            train = train[mine[train]]
            ctx = FitContext(
                fit_id=f"{FIT_PREFIX}-{fold}",
                hyperparameters={},
                seed=fold,
                threads=self.threads,
                device="cpu",
                problem=problem,
                n_classes=d.n_classes,
                metric=d.metric,
                feature_names=[],
                cardinalities=d.pre.cardinalities,  # the base table's string columns: LightGBM's set-split limit
                deadline=self.deadline,
            )
            trained = fit(ctx, x.take(train), d.y[train], x.take(stop), d.y[stop])
            assert trained is not None  # a one-process fit always leads
            pred, seconds = timed_predict(trained, x.take(val))
            predict_seconds += seconds
            if oof is None:
                oof = np.zeros((len(d.y), *pred.shape[1:]), dtype=np.float64)
            oof[val] = pred
            models.append(trained.model)
        assert oof is not None
        return StackBag(models, oof, predict_seconds)

    def guard(self, x: Encoded, pool: list[BaggedModel], fraction: float) -> Guard | str:
        """The verdict, or why there is none (too few rows)."""
        d = self.data
        n = len(d.y)
        held = max(MIN_HOLDOUT_ROWS, round(fraction * n))
        rest = n - held
        if rest < 2 * self.folds or held > n // 2:
            return f"too few rows ({n}) to hold {held} out for the guard and still train {self.folds} folds"
        strat = d.y if d.label.problem_type != "regression" and np.bincount(d.y.astype(np.int64)).min() >= 2 else None
        keep, hold = train_test_split(np.arange(n), test_size=held, random_state=GUARD_SEED, stratify=strat)
        keep, hold = np.sort(keep), np.sort(hold)
        preds = [m.val_pred for m in pool]  # every row: bagged models predict each row out of fold
        chosen_on = selection_metric(d.metric, d.label.problem_type)  # as the weighted ensemble's members are
        ranked, w = select([p[keep] for p in preds], lambda p: self._score(keep, p, chosen_on), 25)  # type: ignore[index]
        ensemble = blend([preds[i][hold] for i in ranked], w)  # type: ignore[index]
        stack = self.bag(x, keep)  # holdout rows: out of fold, as the base models' are
        return Guard(held, self._score(hold, stack.oof[hold]), self._score(hold, ensemble), d.metric)


def eligible(models: list[BaggedModel], n_rows: int) -> list[BaggedModel]:
    """Base models with an out-of-fold prediction for every row (bagged and finished)."""
    return [
        m
        for m in models
        if m.state == "Succeeded" and m.val_pred is not None and m.val_rows is not None and len(m.val_rows) == n_rows
    ]


def add_stack(
    out: Path, plan: Plan, data: Prepared, models: list[BaggedModel], deadline: float | None
) -> BaggedModel | None:
    """The stack's leaderboard model: Succeeded (trained on every row, its fold models saved) or Skipped with the
    reason; None when the plan has no stack layer."""
    sp: StackPlan | None = plan.stacking
    if sp is None:
        return None
    stack = BaggedModel(STACK, STACK, STACK_KEY, len(models), 0, [], state="Skipped")
    pool = eligible(models, len(data.y))
    if not pool:
        stack.message = "no base model has out-of-fold predictions for every row"
        return stack
    if deadline is not None and time.time() >= deadline:
        stack.message = "the time limit ran out before the stack layer could start"
        return stack
    started = time.perf_counter()
    bases = sorted(pool, key=lambda m: -_oof_score(data, m))[: sp.base_models]
    x = augment(data.x, features([m.val_pred for m in bases]))  # type: ignore[misc]
    stacker = Stacker(data, plan.folds, _threads(plan), deadline)
    verdict = stacker.guard(x, pool, sp.holdout_fraction)
    if isinstance(verdict, str) or not verdict.used:
        stack.message = str(verdict)
        stack.extra = {"guard": str(verdict)}
        return stack
    if deadline is not None and time.time() >= deadline:
        stack.message = f"{verdict}; the time limit ran out before it could be trained on every row"
        return stack
    bag = stacker.bag(x, np.arange(len(data.y)))
    ids = [f"{FIT_PREFIX}/{STACK}-f{i}" for i in range(len(bag.models))]
    for fit_id, model in zip(ids, bag.models, strict=True):
        _save(out, fit_id, model)
    stack.state, stack.message = "Succeeded", f"over {len(bases)} base models; {verdict}"
    stack.val_rows, stack.val_pred = np.arange(len(data.y)), bag.oof
    if data.x_test is not None and all(m.test_pred is not None for m in bases):
        stack.test_pred = bag.predict(augment(data.x_test, features([m.test_pred for m in bases])))  # type: ignore[misc]
    own_cost = 1e6 * bag.predict_seconds / len(data.y)
    base_costs = [m.predict_ms_per_1000_rows for m in bases]
    stack.extra = {
        "guard": str(verdict),
        "index": {"key": STACK_KEY, "stacker": STACKER, "base": [m.name for m in bases], "fits": ids},
        "fitTime": time.perf_counter() - started,
        "predTimeVal": bag.predict_seconds,
        "predictMsPer1000Rows": None
        if any(c is None for c in base_costs)
        else own_cost + float(sum(c for c in base_costs if c is not None)),
    }
    return stack


def _oof_score(data: Prepared, m: BaggedModel) -> float:
    assert m.val_pred is not None
    return score(data.metric, data.label.problem_type, data.y, m.val_pred, data.n_classes)


def _threads(plan: Plan) -> int:
    pod = plan.pod_of_rank(0)
    return max(1, pod.cpus // max(1, pod.procs))


def _save(out: Path, fit_id: str, model: Model) -> None:
    directory = store.fit_dir(out, fit_id)
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model.save(Path(tmp))
        for p in Path(tmp).iterdir():
            atomic_write(directory / p.name, p.read_bytes())
