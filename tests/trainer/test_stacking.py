"""The stack layer (spec.stacking): its holdout guard, its leaderboard row, and predicting through it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabjob.api import parse_manifest
from tabjob.contracts.plan import Plan
from tabjob.planner import plan_job
from tabjob_trainer.bagging import BaggedModel
from tabjob_trainer.dataset import Prepared, prepare
from tabjob_trainer.stacking import STACK_KEY, Guard, add_stack
from tests.trainer.helpers import leaderboard, manifest, tabjob, write_manifest


def _product_table(n: int, seed: int) -> pd.DataFrame:
    """y = a * b: what a weighted average of per-feature predictions cannot express and a tree stack can."""
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-2, 2, n), rng.uniform(-2, 2, n)
    return pd.DataFrame({"a": a, "b": b, "y": a * b + rng.normal(scale=0.05, size=n)})


def _prepared(tmp_path: Path, df: pd.DataFrame, label: str, problem: str, metric: str) -> Prepared:
    df.to_csv(tmp_path / "train.csv", index=False)
    return prepare(str(tmp_path / "train.csv"), label, problem, metric)


def _plan(tmp_path: Path, label: str, folds: int = 3, **stacking: float) -> Plan:
    doc = manifest(str(tmp_path / "train.csv"), label, {"GBM": [{}]}, bagging={"folds": folds}, stacking=stacking)
    return plan_job(parse_manifest(doc))


def _base(name: str, pred: np.ndarray, order: int) -> BaggedModel:
    """A finished base model as the leaderboard holds it: out-of-fold predictions for every row."""
    m = BaggedModel(name, name, "GBM", order, 0, [])
    m.val_rows, m.val_pred = np.arange(len(pred)), pred
    return m


def test_the_guard_keeps_a_stack_that_learns_what_a_blend_cannot(tmp_path: Path) -> None:
    data = _prepared(tmp_path, _product_table(900, seed=1), "y", "regression", "rmse")
    a, b = data.x.numeric[:, 0].astype(np.float64), data.x.numeric[:, 1].astype(np.float64)
    bases = [_base("only_a", a, 0), _base("only_b", b, 1)]  # any blend of a and b is far from a * b
    stack = add_stack(tmp_path, _plan(tmp_path, "y"), data, bases, deadline=None)
    assert stack is not None and stack.state == "Succeeded", stack and stack.message
    assert "used" in stack.message and "not used" not in stack.message
    assert stack.extra["index"]["key"] == STACK_KEY and stack.extra["index"]["base"] == ["only_a", "only_b"]
    assert stack.val_pred is not None and len(stack.val_pred) == len(data.y)  # out of fold, every row
    oof_rmse = float(np.sqrt(np.mean((stack.val_pred - data.y) ** 2)))
    assert oof_rmse < 0.5 * float(np.std(data.y))
    for fit_id in stack.extra["index"]["fits"]:
        assert (tmp_path / "fits" / fit_id / "model.txt").is_file()
    assert not (tmp_path / "fits" / "stack" / "record.json").exists()  # never read as a base model's fit


def test_a_tie_on_the_holdout_keeps_the_simpler_model(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x": rng.normal(size=600), "label": rng.choice(["p", "q", "r"], size=600)})
    data = _prepared(tmp_path, df, "label", "multiclass", "accuracy")
    perfect = np.eye(3)[data.y.astype(int)]  # a base model that is never wrong: nothing can beat it
    stack = add_stack(tmp_path, _plan(tmp_path, "label"), data, [_base("oracle", perfect, 0)], deadline=None)
    assert stack is not None and stack.state == "Skipped"
    assert "weighted ensemble 1.0000: not used" in stack.message
    assert not (tmp_path / "fits" / "stack").exists()  # nothing saved for a stack that is not used


def test_too_few_rows_for_the_holdout_is_said_not_guessed(tmp_path: Path) -> None:
    data = _prepared(tmp_path, _product_table(24, seed=2), "y", "regression", "rmse")
    stack = add_stack(tmp_path, _plan(tmp_path, "y", folds=8), data, [_base("a", data.y + 1.0, 0)], deadline=None)
    assert stack is not None and stack.state == "Skipped" and "too few rows (24)" in stack.message


def test_no_time_left_skips_the_stack_saying_so(tmp_path: Path) -> None:
    data = _prepared(tmp_path, _product_table(300, seed=4), "y", "regression", "rmse")
    stack = add_stack(tmp_path, _plan(tmp_path, "y"), data, [_base("a", data.y, 0)], deadline=1.0)
    assert stack is not None and stack.state == "Skipped" and "time limit ran out" in stack.message


@pytest.mark.parametrize(("stack", "ens", "used"), [(0.9, 0.8, True), (0.8, 0.8, False), (-2.0, -1.0, False)])
def test_the_verdict_is_higher_is_better_and_a_tie_is_no(stack: float, ens: float, used: bool) -> None:
    assert Guard(50, stack, ens, "accuracy").used is used


@pytest.mark.slow
def test_a_used_stack_is_ranked_deployed_and_predicts_as_it_scored(tmp_path: Path) -> None:
    """End to end through `tabjob run` and `tabjob predict`: weak base models (three boosting rounds) on a * b, a
    stack that can do better; predicting the test rows through the stack gives the score on its leaderboard row."""
    _product_table(1500, seed=5).to_csv(tmp_path / "train.csv", index=False)
    test = _product_table(400, seed=6)
    test.to_csv(tmp_path / "test.csv", index=False)
    weak = {"num_boost_round": 3, "early_stopping_rounds": 0}
    models = {"GBM": [{"name": "weak", "hyperparameters": weak}], "XGB": [{"name": "weak_xgb", "hyperparameters": {
        "num_boost_round": 3, "early_stopping_rounds": 0}}]}  # fmt: skip
    doc = manifest(str(tmp_path / "train.csv"), "y", models, bagging={"folds": 3}, stacking={})
    doc["spec"]["data"].update({"test": str(tmp_path / "test.csv"), "problemType": "regression"})
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    rows = {r["model"]: r for r in leaderboard(out)}
    row = rows["Stack_L2"]
    assert row["state"] == "Succeeded" and "used" in str(row["note"]), row
    assert row["score_val"] > max(rows["weak"]["score_val"], rows["weak_xgb"]["score_val"])
    assert isinstance(row["predict_ms_per_1000_rows"], float)  # its own folds plus its base models'
    assert leaderboard(out)[0]["model"] in ("Stack_L2", "WeightedEnsemble")
    predicted = tabjob("predict", str(out), str(tmp_path / "test.csv"), "--model", "Stack_L2",
                       "--output", str(tmp_path / "p.csv"))  # fmt: skip
    assert predicted.returncode == 0, predicted.stderr
    pred = pd.read_csv(tmp_path / "p.csv")["prediction"].to_numpy()
    rmse = float(np.sqrt(np.mean((pred - test["y"].to_numpy()) ** 2)))
    assert rmse == pytest.approx(-row["score_test"], rel=1e-4)
