"""Why a bag of fold models falls below a default LightGBM on all rows: the floor's mechanism on proxy tables.

Proxies with the traits of the table that showed the loss (imbalanced multiclass, a few thousand rows, string columns,
accuracy): 4,331-row samples of the diamonds (clarity: 8 classes; cut: 5), five seeds each, a stratified 80/20 split
(866 test rows, as there). Each variant is LightGBM on tabjob's encoding (``prepare``), 3 folds as in the same-families
setting, its bag (the mean of the fold models) and its refit on all rows with the folds' mean iteration count:

- ``GBM``: tabjob's GBM defaults (lr 0.05, feature_fraction 0.9), early stopping on the log-loss, patience 50;
- ``GBM_Plain``: LightGBM's own defaults (lr 0.1, 100 rounds, no stopping), bagged;
- ``GBM, stop on the error``: the GBM defaults stopping on the classification error with 300 rounds' patience
  (as AutoGluon's LightGBM stops on the eval metric);
- the floor: ``LGBMClassifier()`` on all rows, string columns as codes (bench/plain_lightgbm.py) and as categories.

Reads the diamonds from the AutoGluon peer's diamonds_price table (16,000 rows, written by bench/autogluon_peer.py):

    python -m bench.floor_mechanism    # ~10 min on 2 CPUs; writes bench/results/floor_mechanism.json
"""

from __future__ import annotations

import tempfile
from typing import Any

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedKFold, train_test_split

from bench.autogluon_peer import DATA
from bench.common import save
from tabjob_trainer.dataset import prepare
from tabjob_trainer.models.gbm import to_matrix

SOURCE = DATA / "diamonds_price"
SEEDS = range(5)
ROWS = 4_331
VARIANTS: dict[str, tuple[dict[str, Any], int, int]] = {
    "GBM": ({"learning_rate": 0.05, "feature_fraction": 0.9, "metric": "multi_logloss"}, 1000, 50),
    "GBM_Plain": ({"learning_rate": 0.1, "feature_fraction": 1.0, "metric": "multi_logloss"}, 100, 0),
    "GBM, stop on the error": ({"learning_rate": 0.05, "feature_fraction": 0.9, "metric": "multi_error"}, 1000, 300),
}


def one(df: pd.DataFrame, label: str, seed: int) -> dict[str, Any]:
    train, test = train_test_split(df, test_size=0.2, random_state=seed, stratify=df[label])
    with tempfile.TemporaryDirectory() as work:
        train.to_csv(f"{work}/train.csv", index=False)
        test.to_csv(f"{work}/test.csv", index=False)
        d = prepare(f"{work}/train.csv", label, "multiclass", "accuracy", test=f"{work}/test.csv")
    assert d.x_test is not None and d.y_test is not None
    x, y, xt, yt, k = to_matrix(d.x), d.y, to_matrix(d.x_test), d.y_test, d.n_classes
    cats = list(range(d.x.numeric.shape[1], x.shape[1]))
    acc = lambda p: float(np.mean(p.argmax(axis=1) == yt))  # noqa: E731
    out: dict[str, Any] = {
        "floor": acc(lgb.LGBMClassifier(verbose=-1).fit(x, y).predict_proba(xt)),
        "floor, strings as categories": acc(
            lgb.LGBMClassifier(verbose=-1).fit(x, y, categorical_feature=cats).predict_proba(xt)
        ),
    }
    base = {"objective": "multiclass", "num_class": k, "verbose": -1, "num_threads": 2, "deterministic": True,
            "num_leaves": 31, "min_data_in_leaf": 20}  # fmt: skip
    folds = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)
    for name, (params, rounds, patience) in VARIANTS.items():
        preds, iterations, oof = [], [], np.zeros((len(y), k))
        for f, (a, b) in enumerate(folds.split(x, y)):
            dtrain = lgb.Dataset(x[a], y[a], categorical_feature=cats)
            valid = [lgb.Dataset(x[b], y[b], reference=dtrain)]
            callbacks: list[Any] = [lgb.early_stopping(patience, verbose=False)] if patience else []
            booster = lgb.train({**base, **params, "seed": f}, dtrain, rounds, valid_sets=valid, callbacks=callbacks)
            n = booster.best_iteration or booster.current_iteration()
            iterations.append(n)
            preds.append(booster.predict(xt, num_iteration=n))
            oof[b] = booster.predict(x[b], num_iteration=n)
        n = round(float(np.mean(iterations)))
        full = lgb.train({**base, **params, "seed": 0}, lgb.Dataset(x, y, categorical_feature=cats), n)
        out[f"{name}: bag"] = acc(np.mean(preds, axis=0))
        out[f"{name}: one fold model"] = float(np.mean([acc(p) for p in preds]))
        out[f"{name}: out of fold"] = float(np.mean(oof.argmax(axis=1) == y))
        out[f"{name}: refit on all rows"] = acc(full.predict(xt))
        out[f"{name}: rounds"] = iterations
    return out


def main() -> None:
    source = pd.concat([pd.read_csv(SOURCE / "train.csv"), pd.read_csv(SOURCE / "test.csv")], ignore_index=True)
    tables: dict[str, Any] = {}
    for label in ("clarity", "cut"):
        runs = [one(source.sample(n=ROWS, random_state=100 + s).reset_index(drop=True), label, s) for s in SEEDS]
        keys = [k for k, v in runs[0].items() if isinstance(v, float)]
        tables[f"diamonds_{label}"] = {
            "runs": runs,
            "mean": {k: float(np.mean([r[k] for r in runs])) for k in keys},
            "test_rows": round(ROWS * 0.2),
        }
        print(label, {k: round(v, 4) for k, v in tables[f"diamonds_{label}"]["mean"].items()}, flush=True)
    save("floor_mechanism", {"rows": ROWS, "folds": 3, "seeds": len(SEEDS), "tables": tables})


if __name__ == "__main__":
    main()
