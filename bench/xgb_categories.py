"""XGB's categorical columns: sets of levels for every column, for columns of at most 32 levels (the default), or
ordinal codes for every column, on the AutoGluon peer's tables with string columns.

XGBoost's default config alone (the trainer's own fit, early stopping on the fold's rows), bagged over tabjob's
3 folds of the training rows (fold seed 0), scored on the test rows neither saw; each table's widest column says
which columns the limit turns into codes. The tables of ``--group fresh`` are left out: they are the held-out
check. Run it on a quiet machine (~3 min):

    python -m bench.xgb_categories     # then python -m bench.render_xgb_categories --write
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from bench.autogluon_peer import DATA, peer_tables
from bench.common import save
from tabjob import families
from tabjob_trainer.dataset import prepare
from tabjob_trainer.metrics import score
from tabjob_trainer.models import xgb
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.splits import kfold

SETS, LIMIT, CODES = "every column as sets", "up to 32 levels as sets (default)", "ordinal codes"
VARIANTS: dict[str, dict[str, Any]] = {
    SETS: {"max_native_levels": 1_000_000},
    LIMIT: {},
    CODES: {"enable_categorical": False},
}
FOLDS = 3


def run_table(name: str, meta: dict[str, Any]) -> dict[str, Any] | None:
    folder = DATA / name
    d = prepare(str(folder / "train.csv"), meta["label"], meta["problem"], meta["metric"], str(folder / "test.csv"))
    if not d.pre.cardinalities:
        return None  # no string columns: every variant is the same model
    assert d.x_test is not None and d.y_test is not None
    problem = d.label.problem_type
    scores: dict[str, Any] = {}
    for variant, hp in VARIANTS.items():
        started, preds, rounds = time.perf_counter(), [], []
        for fold in range(FOLDS):
            train, val = kfold(d.y, problem, FOLDS, 0, fold)
            ctx = FitContext(fit_id=f"{name}.{fold}", hyperparameters=hp, seed=0, threads=os.cpu_count() or 1,
                             device="cpu", problem=problem, n_classes=d.n_classes, metric=d.metric,
                             feature_names=d.pre.feature_names, cardinalities=d.pre.cardinalities)  # fmt: skip
            trained = xgb.fit(ctx, d.x.take(train), d.y[train], d.x.take(val), d.y[val])
            assert trained is not None
            preds.append(trained.model.predict(d.x_test))
            rounds.append(trained.best_iteration)
        scores[variant] = {
            "test": score(d.metric, problem, d.y_test, np.mean(preds, axis=0), d.n_classes),
            "rounds": rounds,
            "seconds": time.perf_counter() - started,
        }
    names = d.pre.feature_names[len(d.pre.feature_names) - len(d.pre.cardinalities) :]
    return {
        "rows": len(d.y),
        "metric": meta["metric"],
        "levels": dict(zip(names, d.pre.cardinalities, strict=True)),
        "limit": int(families.XGB.defaults["max_native_levels"]),
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "variants": scores,
    }


def main() -> None:
    started = time.time()
    tables = {}
    for name, meta in peer_tables().items():
        result = run_table(name, meta)
        if result is not None:
            tables[name] = result
            print(name, {v: round(s["test"], 4) for v, s in result["variants"].items()}, flush=True)
    save("xgb_categories", {"folds": FOLDS, "seconds": time.time() - started, "tables": tables})


if __name__ == "__main__":
    main()
