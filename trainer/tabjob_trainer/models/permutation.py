"""Permutation importance: what a network's validation score loses when one column is shuffled."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tabjob_trainer.metrics import score
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.preprocess import Encoded

if TYPE_CHECKING:
    from tabjob_trainer.models.network import NetworkModel


def permutation_importance(
    model: NetworkModel, val: Encoded, y_val: np.ndarray, ctx: FitContext, rows: int = 2000, max_features: int = 100
) -> dict[str, float]:
    """Drop in the validation score when one column is shuffled: the MLP's feature importance.

    Bounded (at most ``rows`` rows and ``max_features`` columns) so it stays a small fraction of the fit.
    """
    rng = np.random.default_rng(ctx.seed)
    take = rng.permutation(len(y_val))[:rows]
    x, y = val.take(take), y_val[take]
    base = score(ctx.metric, ctx.problem, y, model.predict(x), ctx.n_classes)
    n_num = x.numeric.shape[1]
    out: dict[str, float] = {}
    for j, name in enumerate(ctx.feature_names[:max_features]):
        shuffled = Encoded(x.numeric.copy(), x.categorical.copy())
        if j < n_num:
            shuffled.numeric[:, j] = rng.permutation(shuffled.numeric[:, j])
        else:
            shuffled.categorical[:, j - n_num] = rng.permutation(shuffled.categorical[:, j - n_num])
        out[name] = base - score(ctx.metric, ctx.problem, y, model.predict(shuffled), ctx.n_classes)
    return out
