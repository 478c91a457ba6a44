"""Quality: the best model's test score against plain LightGBM with default parameters on the same data.

Three datasets that need no download (scikit-learn's own): breast_cancer (the quickstart's), wine, diabetes.
Both sides train on the fixed 80% split (``sklearn://NAME?split=train``) and are scored on the other 20% with
the job's metric (higher is better; errors negated). tabjob runs the quickstart's shape: GBM + NN_TORCH,
3 folds, weighted ensemble. Goal: never below plain LightGBM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import job, save, tabjob_run
from bench.plain_lightgbm import default_lightgbm_test_score
from tabjob_trainer.dataset import prepare

DATASETS = {"breast_cancer": "roc_auc", "wine": "accuracy", "diabetes": "rmse"}


def plain_lightgbm(name: str, metric: str) -> float:
    d = prepare(f"sklearn://{name}?split=train", "target", "auto", metric, test=f"sklearn://{name}?split=test")
    return default_lightgbm_test_score(d)


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
