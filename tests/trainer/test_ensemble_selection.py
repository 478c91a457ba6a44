"""The weighted ensemble of a classifier is chosen on the log-loss, and deployed ahead of any one model."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from tabjob_trainer.bagging import BaggedModel
from tabjob_trainer.dataset import Prepared
from tabjob_trainer.ensemble import select, selection_metric
from tabjob_trainer.leaderboard import ENSEMBLE, add_ensemble, rows_for
from tabjob_trainer.metrics import score


@pytest.mark.parametrize(
    ("metric", "problem", "chosen_on"),
    [
        ("accuracy", "binary", "log_loss"),
        ("roc_auc", "binary", "log_loss"),
        ("accuracy", "multiclass", "log_loss"),
        ("log_loss", "multiclass", "log_loss"),
        ("rmse", "regression", "rmse"),
        ("mae", "regression", "mae"),
    ],
)
def test_a_classifiers_ensemble_is_chosen_on_the_log_loss(metric: str, problem: str, chosen_on: str) -> None:
    assert selection_metric(metric, problem) == chosen_on  # type: ignore[arg-type]


def _data(y: np.ndarray, metric: str = "accuracy", problem: str = "binary") -> Prepared:
    """What the ensemble and the leaderboard read of a Prepared: labels, metric, problem, no test rows."""
    return cast(Prepared, SimpleNamespace(y=y, y_test=None, metric=metric, n_classes=0,
                                          label=SimpleNamespace(problem_type=problem)))  # fmt: skip


def _model(name: str, order: int, pred: np.ndarray) -> BaggedModel:
    return BaggedModel(name, name, name, order, 0, [], val_rows=np.arange(len(pred)), val_pred=pred)


def test_the_log_loss_tempers_a_sharp_model_that_the_accuracy_alone_would_keep() -> None:
    draw = np.random.default_rng(3)
    y = draw.integers(0, 2, 400).astype(np.float64)
    # "sharp" is right on 80% of the rows and certain of every answer; "calibrated" is right on 75% and says 0.7.
    sharp_right, calibrated_right = draw.random(400) < 0.80, draw.random(400) < 0.75
    sharp = np.where(sharp_right == (y == 1), 0.999, 0.001)
    calibrated = np.where(calibrated_right == (y == 1), 0.7, 0.3)
    data = _data(y)
    models = [_model("sharp", 0, sharp), _model("calibrated", 1, calibrated)]
    ensemble = add_ensemble(models, data, size=25)
    assert ensemble is not None and ensemble.val_pred is not None
    # On the accuracy, Caruana keeps "sharp" alone; on the log-loss "calibrated" tempers its certainty.
    accuracy = select([sharp, calibrated], lambda p: score("accuracy", "binary", y, p), 25)
    assert accuracy[1][accuracy[0].index(1)] == 0.0, accuracy
    assert set(ensemble.extra["weights"]) == {"sharp", "calibrated"}, ensemble.extra["weights"]
    assert "chosen on log_loss" in ensemble.message
    blend_loss = score("log_loss", "binary", y, ensemble.val_pred)
    assert blend_loss > max(score("log_loss", "binary", y, p) for p in (sharp, calibrated))


def test_the_ensemble_is_deployed_even_below_a_members_score_val() -> None:
    """Chosen on the log-loss, a blend can score below one of its members on the eval metric (here, by
    construction, an ensemble that is "calibrated" alone): it is still rows[0], what is deployed."""
    draw = np.random.default_rng(3)
    y = draw.integers(0, 2, 400).astype(np.float64)
    sharp = np.where((draw.random(400) < 0.80) == (y == 1), 0.999, 0.001)
    calibrated = np.where((draw.random(400) < 0.75) == (y == 1), 0.7, 0.3)
    models = [_model("sharp", 0, sharp), _model("calibrated", 1, calibrated)]
    ensemble = _model(ENSEMBLE, 2, calibrated)
    ensemble.key, ensemble.extra = "ENSEMBLE", {"weights": {"calibrated": 1.0}, "fitTime": 0.0, "predTimeVal": 0.0}
    rows = rows_for(models, ensemble, _data(y))
    assert [r["model"] for r in rows] == [ENSEMBLE, "sharp", "calibrated"]
    assert rows[0]["score_val"] < rows[1]["score_val"]


def test_a_regressors_ensemble_is_still_chosen_on_its_eval_metric_and_never_below_its_best_member() -> None:
    draw = np.random.default_rng(5)
    y = draw.normal(0, 1, 300)
    a, b = y + draw.normal(0, 0.5, 300), y + draw.normal(0, 0.6, 300)
    data = _data(y, "rmse", "regression")
    models = [_model("a", 0, a), _model("b", 1, b)]
    ensemble = add_ensemble(models, data, size=25)
    assert ensemble is not None and ensemble.message == ""
    rows = rows_for(models, ensemble, data)
    assert rows[0]["model"] == ENSEMBLE and rows[0]["score_val"] >= max(r["score_val"] for r in rows[1:])
