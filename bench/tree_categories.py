"""The boosted trees' categorical columns: sets of levels for every column, for columns of at most 32 levels (XGB's
default), or ordinal codes for every column, on the AutoGluon peer's tables with string columns; for LightGBM also
its default, each fold keeping whichever of the three scores best on its own validation rows.

XGBoost's or LightGBM's default config alone (the trainer's own fit, early stopping on the fold's rows), bagged over
tabjob's 3 folds of the training rows (fold seed 0), scored out of fold and on the test rows neither saw; each
table's widest column says which columns the limit turns into codes. The held-out groups' tables are left out;
``--group wide`` runs the tables kept to check the limit on (each with a column of more than 32 levels) alone,
into ``<family>_categories_wide.json``. Run it on a quiet machine (~3 min a family):

    python -m bench.tree_categories --family XGB    # then python -m bench.render_tree_categories --write
    python -m bench.tree_categories --family GBM
    python -m bench.tree_categories --family GBM --group wide
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from bench.autogluon_peer import DATA, peer_tables
from bench.common import save
from tabjob import families
from tabjob_trainer.dataset import prepare
from tabjob_trainer.metrics import score
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.models.registry import family
from tabjob_trainer.splits import kfold

SETS, LIMIT, CODES = "every column as sets", "up to 32 levels as sets (default)", "ordinal codes"
LIMIT_ONLY, COMPARE = "up to 32 levels as sets", "the best of the three on the fold's validation rows (default)"
_ONE_WAY = {"compare_native_levels": False}
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "XGB": {SETS: {"max_native_levels": 1_000_000}, LIMIT: {}, CODES: {"enable_categorical": False}},
    "GBM": {
        SETS: {"max_native_levels": 1_000_000, **_ONE_WAY},
        LIMIT_ONLY: _ONE_WAY,
        CODES: {"max_native_levels": 0, **_ONE_WAY},
        COMPARE: {},
    },
}
FOLDS = 3


def run_table(key: str, name: str, meta: dict[str, Any]) -> dict[str, Any] | None:
    folder = DATA / name
    d = prepare(str(folder / "train.csv"), meta["label"], meta["problem"], meta["metric"], str(folder / "test.csv"))
    if not d.pre.cardinalities:
        return None  # no string columns: every variant is the same model
    assert d.x_test is not None and d.y_test is not None
    problem = d.label.problem_type
    scores: dict[str, Any] = {}
    for variant, hp in VARIANTS[key].items():
        started, preds, rounds, kept = time.perf_counter(), [], [], []
        oof: np.ndarray | None = None
        for fold in range(FOLDS):
            train, val = kfold(d.y, problem, FOLDS, 0, fold)
            ctx = FitContext(fit_id=f"{name}.{fold}", hyperparameters=hp, seed=0, threads=os.cpu_count() or 1,
                             device="cpu", problem=problem, n_classes=d.n_classes, metric=d.metric,
                             feature_names=d.pre.feature_names, cardinalities=d.pre.cardinalities)  # fmt: skip
            trained = family(key).fit(ctx, d.x.take(train), d.y[train], d.x.take(val), d.y[val])
            assert trained is not None
            pred = trained.model.predict(d.x.take(val))
            oof = np.zeros((len(d.y), *pred.shape[1:])) if oof is None else oof
            oof[val] = pred
            preds.append(trained.model.predict(d.x_test))
            rounds.append(trained.best_iteration)
            kept.append(trained.settings_chosen.get("max_native_levels"))
        scores[variant] = {
            "val": score(d.metric, problem, d.y, np.asarray(oof), d.n_classes),
            "test": score(d.metric, problem, d.y_test, np.mean(preds, axis=0), d.n_classes),
            "rounds": rounds,
            "kept": kept,  # the max_native_levels each fold kept, where it compared ways
            "seconds": time.perf_counter() - started,
        }
    names = d.pre.feature_names[len(d.pre.feature_names) - len(d.pre.cardinalities) :]
    return {
        "rows": len(d.y),
        "metric": meta["metric"],
        "levels": dict(zip(names, d.pre.cardinalities, strict=True)),
        "limit": int(families.family(key).defaults["max_native_levels"]),
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "variants": scores,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", choices=sorted(VARIANTS), default="XGB")
    parser.add_argument("--group", choices=("", "wide"), default="", help="a held-out group's tables instead")
    args = parser.parse_args()
    key = args.family
    started = time.time()
    tables = {}
    for name, meta in peer_tables(args.group).items():
        result = run_table(key, name, meta)
        if result is not None:
            tables[name] = result
            print(name, {v: round(s["test"], 4) for v, s in result["variants"].items()}, flush=True)
    results = f"{key.lower()}_categories" + (f"_{args.group}" if args.group else "")
    save(results, {"family": key, "folds": FOLDS, "seconds": time.time() - started, "tables": tables})


if __name__ == "__main__":
    main()
