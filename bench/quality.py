"""Quality: the best model's test score against plain LightGBM with default parameters on the same data.

Three datasets that need no download (scikit-learn's own): breast_cancer (the quickstart's), wine, diabetes.
Both sides train on the fixed 80% split (``sklearn://NAME?split=train``) and are scored on the other 20% with
the job's metric (higher is better; errors negated). tabjob runs the quickstart's shape: GBM + NN_TORCH,
3 folds, weighted ensemble. Goal: never below plain LightGBM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightgbm as lgb

from bench.common import job, save, tabjob_run
from tabjob_trainer.dataset import prepare
from tabjob_trainer.metrics import score
from tabjob_trainer.models.gbm import to_matrix

DATASETS = {"breast_cancer": "roc_auc", "wine": "accuracy", "diabetes": "rmse"}


def plain_lightgbm(name: str, metric: str) -> float:
    d = prepare(f"sklearn://{name}?split=train", "target", "auto", metric, test=f"sklearn://{name}?split=test")
    assert d.x_test is not None and d.y_test is not None
    problem = d.label.problem_type
    model: Any = lgb.LGBMRegressor(verbose=-1) if problem == "regression" else lgb.LGBMClassifier(verbose=-1)
    model.fit(to_matrix(d.x), d.y)
    if problem == "regression":
        pred = model.predict(to_matrix(d.x_test))
    else:
        proba = model.predict_proba(to_matrix(d.x_test))
        pred = proba[:, 1] if problem == "binary" else proba
    return score(d.metric, problem, d.y_test, pred, d.n_classes)


def main() -> None:
    work = Path("/tmp/tabjob-bench/quality")
    result: dict[str, Any] = {}
    for name, metric in DATASETS.items():
        doc = job(
            f"sklearn://{name}?split=train",
            {"GBM": [{"hyperparameters": {"num_boost_round": 300}}], "NN_TORCH": [{"hyperparameters": {}}]},
            label="target",
            resources={"cpus": 2, "cpusPerPod": 1},
            bagging={"folds": 3},
            ensemble={"size": 25},
        )
        doc["spec"]["data"].update({"test": f"sklearn://{name}?split=test", "evalMetric": metric})
        wall, out = tabjob_run(doc, work, name)
        import json

        rows = json.loads((out / "leaderboard.json").read_text())
        best = rows[0]
        baseline = plain_lightgbm(name, metric)
        result[name] = {
            "metric": metric,
            "best_model": best["model"],
            "tabjob_test": best["score_test"],
            "plain_lightgbm_test": baseline,
            "not_below": best["score_test"] >= baseline - 1e-12,
            "wall_seconds": wall,
            "leaderboard": [(r["model"], r["score_val"], r["score_test"]) for r in rows],
        }
    save("quality", result)


if __name__ == "__main__":
    main()
