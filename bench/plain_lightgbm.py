"""The floor every quality benchmark compares against: a default LGBMClassifier/LGBMRegressor on the same split."""

from __future__ import annotations

from typing import Any

import lightgbm as lgb
import numpy as np

from tabjob_trainer.dataset import Prepared
from tabjob_trainer.metrics import score
from tabjob_trainer.models.gbm import to_matrix


def default_lightgbm_test_predictions(d: Prepared) -> np.ndarray:
    """Test predictions of LightGBM with its defaults, fitted on all of `d`'s training rows: values for a
    regression, the positive class's probability for a binary label, one column per class otherwise."""
    assert d.x_test is not None
    problem = d.label.problem_type
    model: Any = lgb.LGBMRegressor(verbose=-1) if problem == "regression" else lgb.LGBMClassifier(verbose=-1)
    model.fit(to_matrix(d.x), d.y)
    return predictions(model, problem, to_matrix(d.x_test))


def predictions(model: Any, problem: str, x: np.ndarray) -> np.ndarray:
    """A fitted LightGBM estimator's predictions as the metrics take them: values for a regression, the positive
    class's probability for a binary label, one column per class otherwise."""
    if problem == "regression":
        return np.asarray(model.predict(x))
    proba = np.asarray(model.predict_proba(x))
    return proba[:, 1] if problem == "binary" else proba


def default_lightgbm_test_score(d: Prepared) -> float:
    """Test score of LightGBM with its defaults, fitted on all of `d`'s training rows."""
    assert d.y_test is not None
    pred = default_lightgbm_test_predictions(d)
    return score(d.metric, d.label.problem_type, d.y_test, pred, d.n_classes)
