"""Write operator/tabjob/families/xgboost_parameters.py: every parameter name XGBoost stores, aliases included.

XGBoost has no list of its parameters to ask for, and ``xgb.train`` only warns about a name it did not use (and
trains on). Every parameter it reads is kept in a booster's saved configuration, under its own name and its
aliases (``eta`` and ``learning_rate``), so one tiny booster per booster type, tree method and objective family
collects them all; the global configuration (``verbosity``) and ``eval_metric`` (saved as ``metrics``) are added.
The operator never imports XGBoost; tests/trainer/test_registry.py fails when the installed XGBoost's names
differ from the module. Run ``python -m hack.xgboost_parameters`` after changing XGBoost's version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb

from hack import parameter_names

TARGET = Path(__file__).resolve().parents[1] / "operator" / "tabjob" / "families" / "xgboost_parameters.py"
# An objective per family of objective parameters (huber_slope, tweedie_variance_power, the AFT and ranking ones).
OBJECTIVES: dict[str, dict[str, Any]] = {
    "binary:logistic": {}, "multi:softprob": {"num_class": 3}, "reg:squarederror": {},
    "reg:pseudohubererror": {}, "reg:tweedie": {}, "reg:quantileerror": {"quantile_alpha": 0.5}, "reg:gamma": {},
    "count:poisson": {}, "survival:aft": {}, "survival:cox": {}, "rank:ndcg": {},
}  # fmt: skip
# Keys of the saved configuration that name a section or an entry of a list, not a parameter.
NOT_PARAMETERS = frozenset({"name"})


def _data(objective: str) -> xgb.DMatrix:
    x = np.random.default_rng(0).random((64, 3))
    y = (x[:, 0] * 3).astype(int) if objective.startswith("multi") else (x[:, 0] > 0.5).astype(float)
    positive = objective in ("reg:gamma", "reg:tweedie", "survival:cox")  # they want labels above zero
    data = xgb.DMatrix(x, label=y + 1 if positive else y)
    if objective == "survival:aft":
        data.set_float_info("label_lower_bound", y + 1)
        data.set_float_info("label_upper_bound", y + 2)
    if objective.startswith("rank"):
        data.set_group([32, 32])
    return data


def _keys(config: Any) -> set[str]:
    if isinstance(config, list):
        return set().union(*map(_keys, config)) if config else set()
    if not isinstance(config, dict):
        return set()
    leaves = {k for k, v in config.items() if not isinstance(v, dict | list)}
    return leaves.union(*map(_keys, config.values())) if config else leaves


def names() -> frozenset[str]:
    """XGBoost's parameters, from the configurations of boosters it trains here."""
    found: set[str] = {"eval_metric", *xgb.get_config()}
    learners = [{"booster": b, "tree_method": t} for b in ("gbtree", "dart") for t in ("hist", "approx", "exact")]
    learners += [{"booster": "gblinear", "updater": u} for u in ("shotgun", "coord_descent")]
    for learner in learners:
        for objective, extra in OBJECTIVES.items():
            params = {**learner, "objective": objective, **extra}
            trained = xgb.train(params, _data(objective), num_boost_round=1)
            found |= _keys(json.loads(trained.save_config()))
    return frozenset(found - NOT_PARAMETERS)


if __name__ == "__main__":
    parameter_names.write(TARGET, "XGBoost", xgb.__version__, names(), "from boosters XGBoost trained")
