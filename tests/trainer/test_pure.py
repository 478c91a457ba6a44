"""The trainer's pure parts: problem inference, preprocessing, metrics, ensemble selection, bagging, slots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabjob.contracts.plan import FitPlan
from tabjob_trainer.bagging import combine, model_name
from tabjob_trainer.ensemble import blend, caruana, weights
from tabjob_trainer.metrics import resolve_metric, score
from tabjob_trainer.preprocess import Preprocessor
from tabjob_trainer.problem import infer_problem_type
from tabjob_trainer.record import FitRecord
from tabjob_trainer.splits import holdout, kfold


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["a", "b", "a"], "binary"),
        (["a", "b", "c"], "multiclass"),
        ([0, 1, 1, 0], "binary"),
        ([0.5, 1.25, 3.0, 7.5], "regression"),
        ([1, 2, 3] * 10, "multiclass"),
        (list(range(100)), "regression"),
        ([True, False, True], "binary"),
    ],
)
def test_problem_inference(values: list[object], expected: str) -> None:
    assert infer_problem_type(pd.Series(values)) == expected


def test_unseen_and_missing_categories_become_unknown() -> None:
    train = pd.DataFrame({"n": [1.0, 2.0, 3.0], "c": ["a", "b", "a"], "y": [0, 1, 0]})
    pre = Preprocessor.fit(train, "y")
    assert pre.numeric == ["n"] and pre.categorical == ["c"] and pre.categories["c"] == ["a", "b"]
    enc = pre.transform(pd.DataFrame({"n": [None, 5.0, 1.0], "c": ["zzz", None, "b"]}))
    assert enc.categorical[:, 0].tolist() == [-1, -1, 1]
    assert np.isnan(enc.numeric[0, 0])
    assert Preprocessor.from_dict(pre.to_dict()) == pre


def test_errors_are_negated_and_scores_are_not() -> None:
    y = np.array([1.0, 2.0, 3.0])
    assert score("rmse", "regression", y, y + 1) == pytest.approx(-1.0)
    assert score("mae", "regression", y, y - 2) == pytest.approx(-2.0)
    assert score("r2", "regression", y, y) == pytest.approx(1.0)
    yb = np.array([0, 1, 1, 0])
    assert score("accuracy", "binary", yb, np.array([0.1, 0.9, 0.2, 0.3])) == pytest.approx(0.75)
    assert score("log_loss", "binary", yb, np.array([0.1, 0.9, 0.9, 0.1])) < 0
    probs = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    assert score("roc_auc", "multiclass", np.array([0, 1, 2]), probs, 3) == pytest.approx(1.0)
    assert resolve_metric("auto", "multiclass") == "accuracy"
    with pytest.raises(ValueError, match="does not apply"):
        resolve_metric("rmse", "binary")


def test_caruana_prefers_the_better_model_and_keeps_the_best_prefix() -> None:
    y = np.array([0.0, 1.0, 2.0, 3.0])
    good, bad = y + 0.1, y + 3.0
    counts, best = caruana([bad, good], lambda p: -float(np.mean((p - y) ** 2)), size=5)
    assert counts == [0, 1]  # adding anything after the first pick only got worse
    assert best == pytest.approx(-0.01)
    # Two models with opposite errors: the blend beats both.
    counts, _ = caruana([y + 1, y - 1], lambda p: -float(np.mean((p - y) ** 2)), size=4)
    assert counts == [1, 1]
    assert blend([y + 1, y - 1], weights(counts)) == pytest.approx(y)


def test_caruana_under_an_inference_cap_only_weighs_members_whose_costs_fit_it() -> None:
    """Two models with opposite errors blend perfectly, but together they cost 30 ms against a cap of 25: the
    capped ensemble keeps one. A member already picked costs nothing more to pick again."""
    y = np.array([0.0, 1.0, 2.0, 3.0])
    mse = lambda p: -float(np.mean((p - y) ** 2))  # noqa: E731
    preds, costs = [y + 1, y - 1, y + 1.5], [10.0, 20.0, 4.0]
    assert caruana(preds, mse, size=4)[0][:2] == [1, 1]
    counts, _ = caruana(preds, mse, size=4, costs=costs, limit=25.0)
    assert sum(c for c, n in zip(costs, counts, strict=True) if n) <= 25.0
    assert counts[0] > 0 and counts[1] == 0
    assert caruana(preds, mse, size=4, costs=costs, limit=1.0) == ([0, 0, 0], float("-inf"))  # nothing fits


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=6).filter(lambda c: sum(c) > 0))
def test_weights_sum_to_one(counts: list[int]) -> None:
    assert sum(weights(counts)) == pytest.approx(1.0)


def test_folds_cover_every_row_once_and_the_split_does_not_depend_on_the_model() -> None:
    y = np.array([0, 1] * 25)
    seen = np.concatenate([kfold(y, "binary", 5, bag_set=0, fold=f)[1] for f in range(5)])
    assert sorted(seen.tolist()) == list(range(50))
    assert (kfold(y, "binary", 5, 1, 2)[1] == kfold(y, "binary", 5, 1, 2)[1]).all()
    train, val = holdout(y, "binary")
    assert len(val) == 10 and not set(train) & set(val) and y[val].sum() == 5  # stratified


def test_bagged_model_averages_folds_per_row() -> None:
    planned = {
        "model": "M", "key": "GBM", "order": 0, "trial": 0, "bag_set": 0, "rank": 0, "ranks": [0], "gpus": 0.0,
        "cpus": 1, "processes": 1, "hyperparameters": {}, "state": "Succeeded",
    }  # fmt: skip
    fits = [FitRecord(id="M.t0.s0.f0", fold=0, **planned), FitRecord(id="M.t0.s0.f1", fold=1, **planned)]
    arrays = {
        "M.t0.s0.f0": {"val_idx": np.array([0, 2]), "val_pred": np.array([0.2, 0.4]), "test_pred": np.array([1.0])},
        "M.t0.s0.f1": {"val_idx": np.array([1, 3]), "val_pred": np.array([0.6, 0.8]), "test_pred": np.array([3.0])},
    }
    m = combine("M", fits, arrays, n_rows=4, expected=2)
    assert m.val_rows.tolist() == [0, 1, 2, 3]  # type: ignore[union-attr]
    assert m.val_pred.tolist() == pytest.approx([0.2, 0.6, 0.4, 0.8])  # type: ignore[union-attr]
    assert m.test_pred.tolist() == [2.0]  # type: ignore[union-attr]
    # Predicting new rows runs both fold models: their costs per row add up (10 ms over 2 rows, 30 ms over 3 rows).
    timed = [fits[0].model_copy(update={"pred_time_val": 0.01, "rows_val": 2}),
             fits[1].model_copy(update={"pred_time_val": 0.03, "rows_val": 3})]  # fmt: skip
    assert combine("M", timed, arrays, n_rows=4, expected=2).predict_ms_per_1000_rows == pytest.approx(5000 + 10000)
    assert m.predict_ms_per_1000_rows is None  # folds without a timing: no figure rather than a wrong one
    broken = combine("M", fits[:1], arrays, n_rows=4, expected=2)
    assert broken.state == "Failed" and "1 of 2" in broken.message
    assert model_name("GBM", 1, 3) == "GBM/T2" and model_name("GBM", 0, 1) == "GBM"


def test_termination_summary_fits_in_four_kilobytes_best_rows_first() -> None:
    from tabjob.contracts.results import ModelResult, RunSummary

    models = [
        ModelResult(
            name=f"GBM_{i}",
            state="Succeeded",
            score_val=0.9 - i / 1000,
            fit_seconds=1.0,
            gpus=0.0,
            device="cpu",
            fallback=i == 0,
        )
        for i in range(200)
    ]
    text = RunSummary(best_model="GBM_0", score=0.9, fits_done=200, models=models).for_termination()
    assert len(text) <= 4000
    doc = json.loads(text)
    assert doc["bestModel"] == "GBM_0" and doc["models"][0] == {
        "name": "GBM_0",
        "state": "Succeeded",
        "scoreVal": 0.9,
        "fitSeconds": 1.0,
        "gpus": 0.0,
        "device": "cpu",
        "fallback": True,
    }
    assert 10 < len(doc["models"]) < 200


def test_fingerprints_see_labels_hyperparameters_and_split(tmp_path: Path) -> None:
    from tabjob_trainer.dataset import prepare
    from tabjob_trainer.fingerprint import changed, data_identity, fit_fingerprint

    df = pd.DataFrame({"a": [float(i) for i in range(40)], "y": ["p", "q"] * 20})
    df.to_csv(tmp_path / "one.csv", index=False)
    df.assign(y=["q", "p"] * 20).to_csv(tmp_path / "flipped.csv", index=False)  # same shape, other labels
    one = data_identity(prepare(str(tmp_path / "one.csv"), "y", "auto", "auto"))
    assert one == data_identity(prepare(str(tmp_path / "one.csv"), "y", "auto", "auto"))
    flipped = data_identity(prepare(str(tmp_path / "flipped.csv"), "y", "auto", "auto"))
    assert flipped != one

    fit = FitPlan(
        id="GBM.t0",
        model="GBM",
        key="GBM",
        order=0,
        trial=0,
        bag_set=0,
        fold=None,
        cpus=1,
        gpus=0,
        processes=1,
        rank=0,
        ranks=[0],
        device="cpu",
        slot=0,
        hyperparameters={"num_leaves": 8},
        seed=0,
    )
    base = fit_fingerprint(fit, 0, one)
    assert changed(base, fit_fingerprint(fit, 0, one)) == []
    assert changed(base, fit_fingerprint(fit, 0, flipped)) == ["data (rows, columns or labels)"]
    other = fit.model_copy(update={"hyperparameters": {"num_leaves": 9}})
    assert changed(base, fit_fingerprint(other, 0, one)) == ["hyperparameters"]
    assert changed(base, fit_fingerprint(fit, 3, one)) == ["validation split"]
    assert changed(None, base) == ["fingerprint (the earlier fit has none)"]
