"""The lever named next for quality, measured before it is built: pairwise arithmetic features for LightGBM.

AutoGluon's CPU portfolio of 1.5 (``best_quality_v150``) leads with a LightGBM on prepared features (its
``LightGBMPrep`` configs: arithmetic combinations of numeric columns, among others). Before tabjob grows such a
config, this measures the idea alone on the peer's tables (bench/autogluon_peer.py writes them; the test rows are
seen by nobody): LightGBM's defaults on all the training rows, as the floor is, with and without ``a/b``, ``a*b``
and ``a-b`` for every pair of the numeric columns its plain fit gains most on (at most ``TOP``), and the one of the
two a 3-fold cross-validation on the training rows chooses, which is how a portfolio's ensemble would keep it.
Each at ``SEEDS`` seeds of LightGBM's row subsampling (``subsample`` 0.9), so the spread of one table is visible.

    python -m bench.arithmetic_features [--only NAME,NAME]    # then python -m bench.render_arithmetic --write
"""

from __future__ import annotations

import argparse
import itertools
import os
from typing import Any

import lightgbm as lgb
import numpy as np
from sklearn.model_selection import KFold, StratifiedKFold

from bench.autogluon_peer import DATA, HELD_OUT, peer_tables
from bench.common import save
from bench.plain_lightgbm import predictions
from tabjob_trainer.dataset import Prepared, prepare
from tabjob_trainer.metrics import score
from tabjob_trainer.models.gbm import to_matrix

TOP = 10  # numeric columns combined: 45 pairs, 135 features at most
SEEDS = (0, 1, 2)
FOLDS = 3


def _model(problem: str, seed: int) -> Any:
    kw: dict[str, Any] = {"verbose": -1, "random_state": seed, "subsample": 0.9, "subsample_freq": 1, "n_jobs": 2}
    return lgb.LGBMRegressor(**kw) if problem == "regression" else lgb.LGBMClassifier(**kw)


def top_numeric(d: Prepared) -> list[int]:
    """The numeric columns LightGBM's plain defaults gain most on, at most TOP of them, none it never splits on."""
    n_num = d.x.numeric.shape[1]
    model = _model(d.label.problem_type, 0).set_params(importance_type="gain").fit(to_matrix(d.x), d.y)
    gain = np.asarray(model.feature_importances_)[:n_num]
    return [int(i) for i in np.argsort(-gain, kind="stable")[:TOP] if gain[i] > 0]


def with_arithmetic(x: np.ndarray, columns: list[int]) -> np.ndarray:
    """``x`` and, for each pair of ``columns``, their ratio (missing where the divisor is 0), product and difference."""
    extra = []
    for i, j in itertools.combinations(columns, 2):
        a, b = x[:, i].astype(np.float64), x[:, j].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            extra += [np.where(b == 0, np.nan, a / b), a * b, a - b]
    return np.column_stack([x, *extra]) if extra else x


def _oof(d: Prepared, x: np.ndarray, seed: int) -> float:
    problem = d.label.problem_type
    split = (KFold if problem == "regression" else StratifiedKFold)(FOLDS, shuffle=True, random_state=seed)
    pred: np.ndarray | None = None
    for fit_rows, val_rows in split.split(x, d.y):
        fold = predictions(_model(problem, seed).fit(x[fit_rows], d.y[fit_rows]), problem, x[val_rows])
        if pred is None:
            pred = np.zeros((len(d.y), *fold.shape[1:]))
        pred[val_rows] = fold
    assert pred is not None
    return score(d.metric, problem, d.y, pred, d.n_classes)


def run_table(meta: dict[str, Any], name: str) -> dict[str, Any]:
    folder = DATA / name
    d = prepare(str(folder / "train.csv"), meta["label"], meta["problem"], meta["metric"], str(folder / "test.csv"))
    assert d.x_test is not None and d.y_test is not None
    problem = d.label.problem_type
    columns = top_numeric(d)
    x_plain, t_plain = to_matrix(d.x), to_matrix(d.x_test)
    x_arith, t_arith = with_arithmetic(x_plain, columns), with_arithmetic(t_plain, columns)
    runs = []
    for seed in SEEDS:
        test = {}
        for way, (x, t) in {"plain": (x_plain, t_plain), "arithmetic": (x_arith, t_arith)}.items():
            pred = predictions(_model(problem, seed).fit(x, d.y), problem, t)
            test[way] = score(d.metric, problem, d.y_test, pred, d.n_classes)
        oof = {way: _oof(d, x, seed) for way, x in (("plain", x_plain), ("arithmetic", x_arith))}
        chosen = "arithmetic" if oof["arithmetic"] > oof["plain"] else "plain"
        runs.append({"seed": seed, "test": test, "oof": oof, "chosen": chosen, "chosen_test": test[chosen]})
    return {
        "group": meta["group"],
        "rows": meta["rows"],
        "metric": meta["metric"],
        "numeric_columns": int(d.x.numeric.shape[1]),
        "combined": len(columns),
        "features": [int(x_plain.shape[1]), int(x_arith.shape[1])],
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated table names (default: every peer table)")
    args = parser.parse_args()
    metas = {**peer_tables(), **{n: m for g in HELD_OUT for n, m in peer_tables(g).items()}}
    tables = {}
    for name, meta in metas.items():
        if args.only and name not in args.only.split(","):
            continue
        tables[name] = run_table(meta, name)
        runs = tables[name]["runs"]
        print(f"{name}: plain {[round(r['test']['plain'], 4) for r in runs]}, arithmetic "
              f"{[round(r['test']['arithmetic'], 4) for r in runs]}, chosen {[r['chosen'] for r in runs]}, "
              f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        save("arithmetic_features", {"top": TOP, "seeds": list(SEEDS), "folds": FOLDS, "tables": tables}, echo=False)


if __name__ == "__main__":
    main()
