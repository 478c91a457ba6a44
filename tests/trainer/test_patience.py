"""The boosted trees' early stopping (models/patience.py): the pure rule, then LightGBM's, CatBoost's and XGBoost's
own fits stopping by it, and the deadline keeping the best round rather than the last."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabjob_trainer.models import cat, gbm, xgb
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.models.patience import OFFSET, Stopper, least_patience, patience, stopper
from tabjob_trainer.preprocess import Encoded


@pytest.mark.parametrize(
    ("rounds", "rows", "least"),
    [
        (300, 2_000, 300),  # up to 10,000 rows: as asked
        (300, 10_000, 300),
        (300, 20_000, 150),  # in proportion fewer above
        (300, 1_000_000, OFFSET),  # never under 20
        (10, 1_000_000, 10),  # nor raised above what was asked
    ],
)
def test_least_patience_shrinks_above_ten_thousand_rows(rounds: int, rows: int, least: int) -> None:
    assert least_patience(rounds, rows) == least


@pytest.mark.parametrize(
    ("best", "least", "rate", "wait"),
    [
        (0, 300, 0.3, 300),
        (900, 300, 0.3, 300),  # 0.3 x 900 + 20 = 290: the least still rules
        (2_000, 300, 0.3, 620),  # then it grows with the best round
        (2_000, 50, 0.0, 50),  # rate 0: the fixed patience
    ],
)
def test_patience_grows_with_the_best_round(best: int, least: int, rate: float, wait: int) -> None:
    assert patience(best, least, rate) == wait


def test_a_config_without_stopping_gets_no_tracker_and_a_fixed_one_is_not_scaled() -> None:
    assert stopper({"early_stopping_rounds": 0, "adaptive_patience": 0.3}, 100) is None
    fixed = stopper({"early_stopping_rounds": 50, "adaptive_patience": 0}, 50_000)
    assert fixed is not None and fixed.least == 50
    raised = stopper({"early_stopping_rounds": 50, "adaptive_patience": 0}, 100, at_least=300)
    assert raised is not None and raised.least == 300


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=400), st.integers(1, 60), st.booleans())
def test_the_tracker_stops_exactly_its_patience_after_the_best_round(
    values: list[float], least: int, higher: bool
) -> None:
    stop = Stopper(least=least, rate=0.0)
    stopped_at = None
    for i, v in enumerate(values):
        if stop.update(i, v, higher):
            stopped_at = i
            break
    seen = values[: (stopped_at if stopped_at is not None else len(values) - 1) + 1]
    best = int(np.argmax(seen) if higher else np.argmin(seen))  # the first best: a tie is no improvement
    assert stop.best_round == best and stop.best_score == seen[best]
    if stopped_at is not None:
        assert stopped_at - best == least
    else:
        assert len(values) - 1 - best < least


def _overfitting_table(rows: int = 600) -> tuple[Encoded, np.ndarray, Encoded, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 6)).astype(np.float32)
    y = x[:, 0] + rng.normal(scale=2.0, size=rows)  # mostly noise: the validation loss turns early
    empty = np.zeros((rows // 2, 0), dtype=np.int64)
    half = rows // 2
    return Encoded(x[:half], empty), y[:half], Encoded(x[half:], empty), y[half:]


def _ctx(hp: dict[str, Any], deadline: float | None = None) -> FitContext:
    return FitContext(fit_id="f", hyperparameters=hp, seed=0, threads=1, device="cpu", problem="regression",
                      n_classes=0, metric="rmse", feature_names=[f"x{i}" for i in range(6)], cardinalities=[],
                      deadline=deadline)  # fmt: skip


@pytest.mark.parametrize("family", [gbm, cat, xgb], ids=["GBM", "CAT", "XGB"])
@pytest.mark.parametrize(("hp", "wait"), [({"early_stopping_rounds": 50, "adaptive_patience": 0}, 50), ({}, 300)])
def test_the_fit_stops_its_patience_after_its_best_round_and_keeps_that_round(
    family: ModuleType, hp: dict[str, Any], wait: int
) -> None:
    x, y, xv, yv = _overfitting_table()
    rounds = {"iterations": 5_000} if family is cat else {"num_boost_round": 5_000}
    trained = family.fit(_ctx({**rounds, "learning_rate": 0.1, **hp}), x, y, xv, yv)
    assert trained is not None
    curve = trained.curve["val"]
    best = int(np.argmin(curve))
    assert trained.best_iteration == best + 1  # a count of rounds, what a refit trains
    assert best < 600, "the table is mostly noise: the validation loss should turn well before the cap"
    assert len(curve) - 1 - best == wait


@pytest.mark.parametrize("family", [gbm, cat, xgb], ids=["GBM", "CAT", "XGB"])
def test_the_deadline_keeps_the_best_round_so_far_not_the_last(family: ModuleType) -> None:
    x, y, xv, yv = _overfitting_table()
    rounds = {"iterations": 1_000_000} if family is cat else {"num_boost_round": 1_000_000}
    hp = {**rounds, "learning_rate": 0.3, "early_stopping_rounds": 100_000, "adaptive_patience": 0}
    trained = family.fit(_ctx(hp, deadline=time.time() + 3), x, y, xv, yv)
    assert trained is not None
    curve = trained.curve["val"]
    best = int(np.argmin(curve))
    assert len(curve) - 1 > best + 50, "the clock, not the patience, ended this fit"
    assert trained.best_iteration == best + 1
    held = trained.model.predict(xv)
    assert np.sqrt(np.mean((held - yv) ** 2)) == pytest.approx(curve[best], rel=1e-4)
