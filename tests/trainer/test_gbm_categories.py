"""GBM's categorical columns: LightGBM splits a column with few levels as a set of them and one with many on its
ordinal codes, the booster keeps that choice through a save and load, and the floor's config declares none; by
default a fit also trains every string column as sets and every one as codes and keeps the way that scores best on
its validation rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tabjob import families
from tabjob_trainer.models import gbm
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.preprocess import Encoded, Preprocessor


def _table(n: int = 600, seed: int = 0) -> tuple[Encoded, np.ndarray, Preprocessor]:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "colour": rng.choice(["red", "green", "blue", "black", "white", "grey"], size=n),  # 6 levels
            "plate": [f"P{i:03d}" for i in rng.integers(0, 200, size=n)],  # ~200 levels of a few rows each
        }
    )
    y = (df["x"] + 2.0 * df["colour"].isin(["red", "grey"]) + rng.normal(scale=0.5, size=n) > 0.7).astype(np.int64)
    pre = Preprocessor.fit(df, "none")
    return pre.transform(df), y.to_numpy(), pre


def _ctx(pre: Preprocessor, **hp: Any) -> FitContext:
    return FitContext(fit_id="t", hyperparameters={"num_boost_round": 40, **hp}, seed=0, threads=1, device="cpu",
                      problem="binary", n_classes=2, metric="roc_auc", feature_names=pre.feature_names,
                      cardinalities=pre.cardinalities)  # fmt: skip


def _categorical(booster: Any) -> set[int]:
    """The features the booster was trained to hold as categorical (the parameter its model text records)."""
    line = next(ln for ln in booster.model_to_string().splitlines() if ln.startswith("[categorical_feature:"))
    listed = line.removeprefix("[categorical_feature:").removesuffix("]").strip()
    return {int(i) for i in listed.split(",") if i.strip()}


@pytest.mark.parametrize(
    ("hp", "expected"),
    [
        ({}, [1]),  # the defaults: 6 levels as a set, ~200 as codes (column 0 is the numeric x)
        ({"max_native_levels": 500}, [1, 2]),
        ({"max_native_levels": 0}, []),
        (dict(families.GBM.floor[1]) if families.GBM.floor else {}, []),  # the floor: LightGBM on the plain matrix
    ],
)
def test_which_columns_lightgbm_splits_as_sets(hp: dict[str, Any], expected: list[int]) -> None:
    _, _, pre = _table()
    assert pre.cardinalities[0] == 6 and pre.cardinalities[1] > 32
    assert gbm.native_columns(int(families.GBM.effective(hp)["max_native_levels"]), 1, pre.cardinalities) == expected


@pytest.mark.parametrize(
    ("hp", "held"), [({}, {1}), ({"max_native_levels": 500}, {1, 2}), ({"max_native_levels": 0}, set())]
)
def test_the_booster_holds_only_the_native_columns_as_categorical(hp: dict[str, Any], held: set[int]) -> None:
    x, y, pre = _table()
    train, val = np.arange(450), np.arange(450, 600)
    trained = gbm.fit(_ctx(pre, **hp, compare_native_levels=False), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None and isinstance(trained.model, gbm.GBMModel)
    assert _categorical(trained.model.booster) == held


def test_a_mixed_model_predicts_the_same_after_a_save_and_load(tmp_path: Path) -> None:
    x, y, pre = _table()
    train, val = np.arange(450), np.arange(450, 600)
    trained = gbm.fit(_ctx(pre), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None
    pred = trained.model.predict(x.take(val))
    trained.model.save(tmp_path)
    np.testing.assert_allclose(gbm.GBMModel.load(tmp_path, "binary").predict(x.take(val)), pred)


@pytest.mark.parametrize(
    ("hp", "cardinalities", "limits"),
    [
        ({}, [6, 200], [32, 200, 0]),  # the limit's, every column as sets, every one as codes
        ({}, [6, 12], [32, 0]),  # every column under the limit: the limit's way is every column as sets
        ({}, [], [32]),  # no string columns: one way
        ({}, [2, 2, 1], [32]),  # two levels or fewer split the same as sets or as codes
        ({}, [2, 40], [32, 40]),  # the limit's way is every column as codes
        ({"compare_native_levels": False}, [6, 200], [32]),
        ({"max_native_levels": 0}, [6, 200], [0, 200]),
        ({"max_native_levels": 200}, [6, 200], [200, 0]),
        (dict(families.GBM.floor[1]) if families.GBM.floor else {}, [6, 200], [0]),  # the floor is one model
        (dict(families.GBM.refit_settings), [6, 200], [32]),  # a refit has no validation rows to compare on
    ],
)
def test_the_ways_a_fit_trains_its_string_columns(
    hp: dict[str, Any], cardinalities: list[int], limits: list[int]
) -> None:
    assert gbm.level_limits(families.GBM.effective(hp), cardinalities) == limits


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_fit_keeps_the_way_that_scores_best_on_its_validation_rows(seed: int) -> None:
    x, y, pre = _table(seed=seed)
    train, val = np.arange(450), np.arange(450, 600)
    alone = {}
    for limit in gbm.level_limits(families.GBM.effective({}), pre.cardinalities):
        one = gbm.fit(_ctx(pre, max_native_levels=limit, compare_native_levels=False), x.take(train), y[train],
                      x.take(val), y[val])  # fmt: skip
        assert one is not None and isinstance(one.model, gbm.GBMModel)
        assert one.kept_seconds is None  # one way: the fit's own time is the kept model's
        alone[limit] = float(one.model.booster.best_score["val"]["auc"])
    best = max(alone, key=lambda k: (alone[k], -list(alone).index(k)))  # the first of equals
    trained = gbm.fit(_ctx(pre), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None and isinstance(trained.model, gbm.GBMModel)
    assert trained.settings_chosen == {"max_native_levels": best}
    assert trained.kept_seconds is not None and trained.kept_seconds > 0  # the refit's estimate reads it
    assert float(trained.model.booster.best_score["val"]["auc"]) == alone[best]
    way = {0: "as codes", 32: "of more than 32 levels as codes"}.get(best, "as sets")
    assert trained.note == f"string columns {way} (best of 3 ways on its validation rows)" and not trained.fallback
    assert _categorical(trained.model.booster) == set(gbm.native_columns(best, 1, pre.cardinalities))
