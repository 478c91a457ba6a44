"""XT: scikit-learn's extremely randomized trees; the forest's code is RF's (``models/rf.py``)."""

from __future__ import annotations

import numpy as np

from tabjob import families
from tabjob_trainer.models.base import Family, FitContext, Trained
from tabjob_trainer.models.rf import ForestModel, fit_forest
from tabjob_trainer.preprocess import Encoded


def fit(ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray) -> Trained | None:
    return fit_forest(families.XT, ctx, train, y_train, val, y_val)


FAMILY = Family(facts=families.XT, fit=fit, load=ForestModel.load)
