"""The boosted trees' early stopping: a fixed 50 rounds' patience (tabjob's defaults before) against AutoGluon's
adaptive rule (at least 300 rounds, 0.3 x the best round + 20 once that is more; the defaults now), for LightGBM,
CatBoost and XGBoost, on the AutoGluon peer's tables.

Each family's default config alone (the trainer's own fit), bagged over tabjob's 3 folds of the training rows
(fold seed 0), then refit on every training row for the mean of the folds' best round counts, as ``refitFull``
does; both scored on the test rows neither saw. GBM also runs the adaptive rule with AutoGluon's 10,000-round cap
instead of tabjob's 1,000. The tables of ``--group fresh`` are left out: they are the held-out check. Run it on a
quiet machine (~25 min):

    python -m bench.tree_patience     # then python -m bench.render_tree_patience --write
    python -m bench.tree_patience --only diamonds_clarity,mpg --merge
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np

from bench.autogluon_peer import DATA, default_lightgbm, peer_tables
from bench.common import ROOT, save
from tabjob import families
from tabjob_trainer.dataset import Prepared, prepare
from tabjob_trainer.metrics import score
from tabjob_trainer.models import cat, gbm, xgb
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.splits import kfold

FIXED, ADAPTIVE, ADAPTIVE_LONG = "fixed 50", "adaptive (default)", "adaptive, 10,000 rounds"
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "GBM": {
        FIXED: {"early_stopping_rounds": 50, "adaptive_patience": 0},
        ADAPTIVE: {},
        ADAPTIVE_LONG: {"num_boost_round": 10_000},
    },
    "CAT": {FIXED: {"early_stopping_rounds": 50, "adaptive_patience": 0}, ADAPTIVE: {}},
    "XGB": {FIXED: {"early_stopping_rounds": 50, "adaptive_patience": 0}, ADAPTIVE: {}},
}
MODULES = {"GBM": gbm, "CAT": cat, "XGB": xgb}
FOLDS = 3
RESULTS = "tree_patience"


def _ctx(d: Prepared, key: str, hp: dict[str, Any], fit_id: str, refit: bool = False) -> FitContext:
    return FitContext(fit_id=fit_id, hyperparameters=hp, seed=0, threads=os.cpu_count() or 1, device="cpu",
                      problem=d.label.problem_type, n_classes=d.n_classes, metric=d.metric,
                      feature_names=d.pre.feature_names, cardinalities=d.pre.cardinalities, refit=refit)  # fmt: skip


def run_variant(d: Prepared, key: str, hp: dict[str, Any], name: str) -> dict[str, Any]:
    """The bag's and its refit's test scores, the folds' round counts and the seconds each took."""
    assert d.x_test is not None and d.y_test is not None
    problem, module = d.label.problem_type, MODULES[key]
    started, preds, rounds = time.perf_counter(), [], []
    for fold in range(FOLDS):
        train, val = kfold(d.y, problem, FOLDS, 0, fold)
        trained = module.fit(_ctx(d, key, hp, f"{name}.{fold}"), d.x.take(train), d.y[train], d.x.take(val), d.y[val])
        assert trained is not None
        preds.append(trained.model.predict(d.x_test))
        rounds.append(trained.best_iteration)
    bag_seconds = time.perf_counter() - started
    facts = families.family(key)
    assert facts.refit_iterations is not None
    refit_hp = {**hp, facts.refit_iterations: max(1, round(float(np.mean(rounds)))), **facts.refit_settings}
    started = time.perf_counter()
    every = np.arange(len(d.y))
    watched = every[:: max(1, len(every) // 1000)][:1000]  # only watched, as the trainer's refit does
    refit = module.fit(_ctx(d, key, refit_hp, f"{name}.full", refit=True), d.x, d.y, d.x.take(watched), d.y[watched])
    assert refit is not None
    return {
        "bag": score(d.metric, problem, d.y_test, np.mean(preds, axis=0), d.n_classes),
        "refit": score(d.metric, problem, d.y_test, refit.model.predict(d.x_test), d.n_classes),
        "rounds": rounds,
        "bag_seconds": bag_seconds,
        "refit_seconds": time.perf_counter() - started,
    }


def run_table(name: str, meta: dict[str, Any]) -> dict[str, Any]:
    folder = DATA / name
    d = prepare(str(folder / "train.csv"), meta["label"], meta["problem"], meta["metric"], str(folder / "test.csv"))
    result: dict[str, Any] = {
        "rows": len(d.y),
        "metric": meta["metric"],
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "default_lightgbm": default_lightgbm(folder, meta),
        "families": {},
    }
    for key, variants in VARIANTS.items():
        result["families"][key] = {v: run_variant(d, key, hp, f"{name}.{key}") for v, hp in variants.items()}
        shown = {v: round(s["bag"], 4) for v, s in result["families"][key].items()}
        print(name, key, shown, flush=True)
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated table names (default: every peer table)")
    parser.add_argument("--merge", action="store_true", help="keep the tables already recorded that this run skips")
    args = parser.parse_args()
    started = time.time()
    recorded = ROOT / "bench" / "results" / f"{RESULTS}.json"
    tables: dict[str, Any] = json.loads(recorded.read_text())["tables"] if args.merge and recorded.exists() else {}
    for name, meta in peer_tables().items():
        if args.only and name not in args.only.split(","):
            continue
        tables[name] = run_table(name, meta)
        # After every table: a run cut short keeps what it measured, and --merge goes on from it.
        save(RESULTS, {"folds": FOLDS, "seconds": time.time() - started, "tables": tables})


if __name__ == "__main__":
    main()
