"""Refit on every training row (AutoGluon's refit_full) and the holdout that chooses between the refits and the bags.

Rank 0's step after the stack and the weighted ensemble (``plan.refit``). A bagged model's fold models each learn
from (k-1)/k of the rows and stop where a proxy of the eval metric peaks on the rest; a refit trains the config once
more on every row for the mean of its folds' best iteration counts (forests and neighbours, which have none, as
they are). What is refit is what would be deployed: the weighted ensemble's members (the stack stays a bag, since
its features are the base bags' out-of-fold predictions; so do the networks, whose bag of k networks is an ensemble
that one refit is not: ``refit_replaces_bag``), or the best model alone.

The guard: a holdout of the training rows (``holdout_fraction``, stratified) is set aside; each member is refit on
the other rows and predicts the holdout, blended with the ensemble's weights; the bags predict it out of fold, blended
the same way. That comparison leans to the bags: their fold models stopped early on those very rows and the
ensemble's weights were fit to their out-of-fold predictions there. So the refit, AutoGluon's choice with refit_full,
is deployed unless the bags score above it in at least ``BAG_CONFIDENCE`` of ``RESAMPLES`` bootstrap resamples of the
holdout (kept on a point lead instead, the bags lost to their refit on the test rows of 7 of the 11 benchmark tables
where the guard kept them). It costs one more fit per member instead of a second bag. Then every member is refit on
all rows (``NAME_FULL`` on the leaderboard, its score_val its bag's, which is what its iteration counts were chosen
on) and, for an ensemble, ``WeightedEnsemble_FULL`` blends them with the same weights. With ``timeLimitSeconds``
members are refit best-weighted first while the bag's own timings say two more fits end before the deadline; members
left over stay bags in the _FULL ensemble.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split

from tabjob import families
from tabjob.contracts.plan import Plan, RefitPlan
from tabjob_trainer import store
from tabjob_trainer.bagging import BaggedModel
from tabjob_trainer.dataset import Prepared
from tabjob_trainer.durable import atomic_write
from tabjob_trainer.ensemble import blend
from tabjob_trainer.fitting import timed_predict
from tabjob_trainer.metrics import score
from tabjob_trainer.models.base import FitContext, Trained
from tabjob_trainer.models.registry import family

SUFFIX = "_FULL"
FIT_PREFIX = "full"  # fits/full/<name>: no record there, so never taken for a planned fit
ENSEMBLE_KEY = "ENSEMBLE"
assert families.GBM.floor is not None, "LightGBM declares the floor every preset trains first"
FLOOR = families.GBM.floor[0]  # LightGBM's own defaults, the config the guard holds every deployed model against
GUARD_SEED = 11  # any fixed seed: the holdout is none of the bags' folds
MIN_HOLDOUT_ROWS = 10
WATCHED_ROWS = 1000  # training rows a refit is given as its validation rows: only its learning curve reads them
RESAMPLES = 200  # bootstrap resamples of the holdout: enough to tell 95% from a coin toss, a second on 5,000 rows
BAG_CONFIDENCE = 0.95  # share of resamples the bags must win to be deployed over their refit


def refit_hyperparameters(m: BaggedModel) -> tuple[dict[str, Any], int | None]:
    """(what the refit of ``m`` trains with, its iteration count or None): the fold's hyperparameters with the
    settings most of its folds chose (the first fold's among equals), the mean of the folds' best iterations under
    the family's iteration setting and the family's refit settings (early stopping off)."""
    facts = families.family(m.key)
    chosen = [json.dumps(f.settings_chosen, sort_keys=True) for f in m.fits]
    hp = {**m.fits[0].hyperparameters, **json.loads(max(chosen, key=chosen.count))}
    if facts.refit_iterations is None:
        return hp, None
    best = [f.best_iteration for f in m.fits if f.best_iteration]
    n = max(1, round(float(np.mean(best)))) if best else int(hp[facts.refit_iterations])
    return {**hp, facts.refit_iterations: n, **facts.refit_settings}, n


@dataclass
class Member:
    """One model the deployed model runs: its bag, its weight, and the refit when there is one."""

    bag: BaggedModel
    weight: float
    chosen: bool = False  # refit (the time and the leaderboard's room allow it)

    @property
    def refittable(self) -> bool:
        """A tree model's bag: a network's stays a bag (``refit_replaces_bag``)."""
        if not self.bag.fits or self.bag.key not in families.FAMILIES:
            return False
        return families.family(self.bag.key).refit_replaces_bag

    def cost_estimate(self, rows: int) -> float:
        """Seconds one fit on ``rows`` rows should take, from the bag's own folds."""
        return refit_seconds(self.bag, rows)


def refit_seconds(bag: BaggedModel, rows: int) -> float:
    """Seconds a refit of ``bag`` on ``rows`` rows should take (pure): each fold's training time scaled to the
    rows and to the refit's iteration count. A fold trained its best iterations and the patience past them, and
    where it compared ways of splitting string columns, every way: the refit trains one way for the mean best
    alone, so a fold's whole time overstated it by up to the patience's share times the ways."""
    _, iterations = refit_hyperparameters(bag)
    costs = []
    for f in bag.fits:
        seconds = f.kept_fit_time if f.kept_fit_time is not None else f.fit_time
        trained = len(f.curve.get("val") or [])
        if iterations and trained:
            seconds *= iterations / trained
        costs.append(seconds * rows / max(f.rows_train or rows, 1))
    return float(np.mean(costs)) if costs else 0.0


class Refitter:
    """Refits for one run: the data, where fits are saved, whether rank 0 holds a GPU."""

    def __init__(self, out: Path, data: Prepared, gpu: bool) -> None:
        self.out, self.data, self.gpu = out, data, gpu

    def fit(self, m: BaggedModel, rows: np.ndarray) -> tuple[Trained, float, int | None]:
        """``m`` refit on ``rows``: (the fit, its seconds, its iteration count)."""
        d = self.data
        hp, n = refit_hyperparameters(m)
        watched = rows[:: max(1, len(rows) // WATCHED_ROWS)][:WATCHED_ROWS]
        ctx = FitContext(
            fit_id=f"{FIT_PREFIX}/{m.name}",
            hyperparameters=hp,
            seed=m.fits[0].bag_set + 1000 * m.trial,
            threads=max(1, m.fits[0].cpus // m.fits[0].processes),  # the plan's resources for one fit of it
            device="cuda:0" if self.gpu and any(f.gpus > 0 for f in m.fits) else "cpu",
            problem=d.label.problem_type,
            n_classes=d.n_classes,
            metric=d.metric,
            feature_names=d.pre.feature_names,
            cardinalities=d.pre.cardinalities,
            fallback_to_cpu=True,  # a refit never fails a finished run for want of a GPU; its row says so
            refit=True,
        )
        started = time.perf_counter()
        trained = family(m.key).fit(ctx, d.x.take(rows), d.y[rows], d.x.take(watched), d.y[watched])
        assert trained is not None  # a one-process fit always leads
        return trained, time.perf_counter() - started, n

    def save(self, name: str, trained: Trained) -> str:
        fit_id = f"{FIT_PREFIX}/{name}"
        directory = store.fit_dir(self.out, fit_id)
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            trained.model.save(Path(tmp))
            for p in Path(tmp).iterdir():
                atomic_write(directory / p.name, p.read_bytes())
        return fit_id


@dataclass(frozen=True)
class Guard:
    """The holdout's scores: the refits', the bags' and, where the pool has it, LightGBM's defaults refit alone; and
    the share of bootstrap resamples of the holdout in which the bags score above the refits."""

    rows: int
    refit_score: float
    bag_score: float
    floor_score: float | None
    metric: str
    bag_confidence: float = 0.0

    @property
    def bag_wins(self) -> bool:
        return self.bag_score > self.refit_score and self.bag_confidence >= BAG_CONFIDENCE

    @property
    def choice(self) -> str:
        """What is deployed: "refit", "floor" or "bag". The bags only on a clear win (they are favoured on these
        rows); LightGBM's defaults where they score above what would be deployed, the floor a deployed model keeps."""
        kept, kept_score = ("bag", self.bag_score) if self.bag_wins else ("refit", self.refit_score)
        return "floor" if self.floor_score is not None and self.floor_score > kept_score else kept

    def __str__(self) -> str:
        floor = "" if self.floor_score is None else f", {FLOOR} alone {self.floor_score:.4f}"
        deployed = {"refit": "refit deployed", "floor": f"{FLOOR}{SUFFIX} deployed", "bag": "bag deployed"}
        return (
            f"guard on {self.rows} held-out rows: refit {self.metric} {self.refit_score:.4f}, bag "
            f"{self.bag_score:.4f} (above the refit in {self.bag_confidence:.0%} of {RESAMPLES} resamples)"
            f"{floor}: {deployed[self.choice]}"
        )


def bag_confidence(data: Prepared, rows: np.ndarray, refit_pred: np.ndarray, bag_pred: np.ndarray) -> float:
    """The share of bootstrap resamples of ``rows`` on which ``bag_pred`` scores above ``refit_pred`` (a resample
    the metric cannot score, such as one class alone for the AUC, counts for neither)."""
    draw = np.random.default_rng(GUARD_SEED)
    wins = scored = 0
    for _ in range(RESAMPLES):
        pick = draw.integers(0, len(rows), len(rows))
        try:
            bag, refit = _score(data, rows[pick], bag_pred[pick]), _score(data, rows[pick], refit_pred[pick])
        except ValueError:
            continue
        scored, wins = scored + 1, wins + int(bag > refit)
    return wins / scored if scored else 0.0


def _score(data: Prepared, rows: np.ndarray, pred: np.ndarray) -> float:
    return score(data.metric, data.label.problem_type, data.y[rows], pred, data.n_classes)


def holdout(data: Prepared, fraction: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(rows the guard's refits train on, rows they are judged on), or None when too few rows to hold any out."""
    n = len(data.y)
    held = max(MIN_HOLDOUT_ROWS, round(fraction * n))
    if held > n // 2:
        return None
    y = data.y
    strat = y if data.label.problem_type != "regression" and np.bincount(y.astype(np.int64)).min() >= 2 else None
    keep, hold = train_test_split(np.arange(n), test_size=held, random_state=GUARD_SEED, stratify=strat)
    return np.sort(keep), np.sort(hold)


def guard(refitter: Refitter, members: list[Member], fraction: float, floor: BaggedModel | None) -> Guard | str:
    """The holdout's verdict on refitting the chosen members (the others stay bags on both sides), against the
    bags and against ``floor`` (LightGBM's defaults) refit alone, or why there is none."""
    d = refitter.data
    split = holdout(d, fraction)
    if split is None:
        return f"too few rows ({len(d.y)}) to hold any out: refit deployed without a guard"
    keep, hold = split
    refits, bags, weights = [], [], []
    for member in members:
        bag = member.bag
        assert bag.val_pred is not None and bag.val_rows is not None
        oof = bag.val_pred[np.searchsorted(bag.val_rows, hold)]
        bags.append(oof)
        if member.chosen:
            trained, _, _ = refitter.fit(bag, keep)
            refits.append(trained.model.predict(d.x.take(hold)))
        else:
            refits.append(oof)  # a member left as a bag is one on both sides
        weights.append(member.weight)
    floor_score = None
    if floor is not None:
        trained, _, _ = refitter.fit(floor, keep)
        floor_score = _score(d, hold, trained.model.predict(d.x.take(hold)))
    refit_pred, bag_pred = blend(refits, weights), blend(bags, weights)
    refit_score, bag_score = _score(d, hold, refit_pred), _score(d, hold, bag_pred)
    confidence = bag_confidence(d, hold, refit_pred, bag_pred)
    return Guard(len(hold), refit_score, bag_score, floor_score, d.metric, confidence)


def add_refits(
    out: Path,
    plan: Plan,
    data: Prepared,
    models: list[BaggedModel],
    ensemble: BaggedModel | None,
    deployed: str | None,
    deadline: float | None,
) -> list[BaggedModel]:
    """The refit rows (``NAME_FULL``, ``WeightedEnsemble_FULL`` when the ensemble is deployed, ``GBM_Plain_FULL``
    when the guard picks LightGBM's defaults), each with ``extra["preferred"]`` (above or below its bag on the
    leaderboard) and, on the one to deploy, ``extra["deployed"]``."""
    rp: RefitPlan | None = plan.refit
    if rp is None or deployed is None:
        return []
    by_name = {m.name: m for m in models}
    if ensemble is not None and deployed == ensemble.name:
        members = [Member(by_name[n], float(w)) for n, w in ensemble.extra["weights"].items()]
        room = rp.max_models - 2  # the ensemble's row and the floor's
    elif deployed in by_name:
        members, room = [Member(by_name[deployed], 1.0)], rp.max_models - 1
    else:
        return []
    members.sort(key=lambda mb: -mb.weight)
    refitter = Refitter(out, data, plan.pod_of_rank(0).gpus > 0)
    n = len(data.y)
    held = round(n * (1 - rp.holdout_fraction))
    floor = by_name.get(FLOOR)
    floor = floor if floor is not None and floor.state == "Succeeded" and floor.fits and deployed != FLOOR else None
    planned = Member(floor, 0.0).cost_estimate(n + held) if floor is not None else 0.0
    for member in members:
        if not member.refittable or room <= 0:
            continue
        estimate = member.cost_estimate(n) + member.cost_estimate(held)
        if deadline is not None and time.time() + planned + estimate > deadline:
            continue
        member.chosen, planned, room = True, planned + estimate, room - 1
    if not any(mb.chosen for mb in members):
        return []
    verdict = guard(refitter, members, rp.holdout_fraction, floor)
    choice = "refit" if isinstance(verdict, str) else verdict.choice
    rows: list[BaggedModel] = []
    everything = np.arange(n)
    for member in members:
        if member.chosen:
            rows.append(_full(refitter, member.bag, everything, str(verdict), choice == "refit"))
    if ensemble is not None and deployed == ensemble.name:
        rows.append(_full_ensemble(data, members, rows, ensemble, str(verdict), choice == "refit"))
    if choice == "floor":
        assert floor is not None
        kept = next((r for r in rows if r.name == FLOOR + SUFFIX), None)
        if kept is None:
            kept = _full(refitter, floor, everything, str(verdict), True)
            rows.append(kept)
        kept.extra["deployed"] = True
    elif choice == "refit":
        rows[-1].extra["deployed"] = True  # the ensemble's refit, or the deployed model's own
    return rows


def _full(refitter: Refitter, bag: BaggedModel, rows: np.ndarray, verdict: str, preferred: bool) -> BaggedModel:
    d = refitter.data
    trained, seconds, n = refitter.fit(bag, rows)
    fit_id = refitter.save(bag.name + SUFFIX, trained)
    watched = rows[:: max(1, len(rows) // WATCHED_ROWS)][:WATCHED_ROWS]
    _, predict_seconds = timed_predict(trained, d.x.take(watched))
    full = BaggedModel(bag.name + SUFFIX, bag.config, bag.key, bag.order, bag.trial, [])
    unit = families.family(bag.key).curve_unit
    length = f"{n} {unit}s, the mean of its folds' best" if n is not None else "its config as it is"
    full.message = f"{bag.name} refit on all {len(rows)} rows ({length}); score_val is the bag's; {verdict}"
    if d.x_test is not None:
        full.test_pred = trained.model.predict(d.x_test)
    assert bag.val_pred is not None and bag.val_rows is not None
    full.extra = {
        "refit": True,
        "preferred": preferred,
        "scoreVal": _score(d, bag.val_rows, bag.val_pred),
        "index": {"key": bag.key, "fits": [fit_id]},
        "fitTime": seconds,
        "predTimeVal": predict_seconds,
        "predictMsPer1000Rows": 1e6 * predict_seconds / max(1, len(watched)),
        "device": trained.device,
    }
    return full


def _full_ensemble(
    data: Prepared,
    members: list[Member],
    refits: list[BaggedModel],
    ensemble: BaggedModel,
    verdict: str,
    preferred: bool,
) -> BaggedModel:
    """The ensemble's weights over the refits, and over the bags of members that were not refit."""
    refit_of = {r.name.removesuffix(SUFFIX): r for r in refits}
    used = [refit_of.get(mb.bag.name, mb.bag) for mb in members]
    weights = {m.name: mb.weight for m, mb in zip(used, members, strict=True)}
    full = BaggedModel(ensemble.name + SUFFIX, ensemble.name + SUFFIX, ENSEMBLE_KEY, ensemble.order, 0, [])
    kept = [mb.bag.name for mb in members if mb.bag.name not in refit_of]
    full.message = f"{ensemble.name} over the refits" + (f" (bags kept: {', '.join(kept)})" if kept else "")
    full.message += f"; score_val is the ensemble's; {verdict}"
    tests = [m.test_pred for m in used]
    if all(t is not None for t in tests):
        full.test_pred = blend(tests, [mb.weight for mb in members])  # type: ignore[arg-type]
    # Refits and the stack keep their timings in extra (no fit records of their own); bags add up their folds'.
    costs = [m.extra.get("predictMsPer1000Rows", m.predict_ms_per_1000_rows) for m in used]
    assert ensemble.val_pred is not None and ensemble.val_rows is not None
    full.extra = {
        "refit": True,
        "preferred": preferred,
        "scoreVal": _score(data, ensemble.val_rows, ensemble.val_pred),
        "weights": weights,
        "index": {"key": ENSEMBLE_KEY, "weights": weights},
        "fitTime": float(sum(r.extra["fitTime"] for r in refits)),
        "predTimeVal": float(sum(m.extra.get("predTimeVal", m.pred_time_val) for m in used)),
        "predictMsPer1000Rows": None if any(c is None for c in costs) else float(sum(costs)),  # type: ignore[arg-type]
    }
    return full
