"""The floor every quality benchmark compares against: a default LGBMClassifier/LGBMRegressor on the same split."""

from __future__ import annotations

from typing import Any

import lightgbm as lgb

from tabjob_trainer.dataset import Prepared
from tabjob_trainer.metrics import score
from tabjob_trainer.models.gbm import to_matrix


def default_lightgbm_test_score(d: Prepared) -> float:
    """Test score of LightGBM with its defaults, fitted on all of `d`'s training rows."""
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
