"""XGB's categorical columns: sets of levels for a column with few, ordinal codes for one with many, unless every
column as sets scores better on the fold's validation rows; the same at predict time after a save and load, and a
model saved before the limit predicting as it was trained."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tabjob import families
from tabjob_trainer.models import xgb
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.preprocess import Encoded, Preprocessor


def _table(n: int = 600, seed: int = 0) -> tuple[Encoded, np.ndarray, Preprocessor]:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "colour": rng.choice(["red", "green", "blue"], size=n),  # 3 levels
            "plate": [f"P{i:03d}" for i in rng.integers(0, 200, size=n)],  # ~200 levels of a few rows each
        }
    )
    y = (df["x"] + 2.0 * (df["colour"] == "red") + rng.normal(scale=0.5, size=n) > 0.7).astype(np.int64)
    pre = Preprocessor.fit(df, "none")
    return pre.transform(df), y.to_numpy(), pre


def _ctx(pre: Preprocessor, **hp: Any) -> FitContext:
    return FitContext(fit_id="t", hyperparameters={"num_boost_round": 40, **hp}, seed=0, threads=1, device="cpu",
                      problem="binary", n_classes=2, metric="roc_auc", feature_names=pre.feature_names,
                      cardinalities=pre.cardinalities)  # fmt: skip


@pytest.mark.parametrize(
    ("hp", "expected"),
    [
        ({}, [True, False]),  # the defaults: 3 levels as a set, ~200 as codes
        ({"max_native_levels": 500}, [True, True]),
        ({"max_native_levels": 2}, [False, False]),
        ({"enable_categorical": False}, [False, False]),
    ],
)
def test_which_columns_xgboost_splits_as_sets(hp: dict[str, Any], expected: list[bool]) -> None:
    _, _, pre = _table()
    assert pre.cardinalities[0] == 3 and pre.cardinalities[1] > 32
    assert xgb.native_columns(families.XGB.effective(hp), pre.cardinalities) == expected


def test_the_frame_holds_categories_for_native_columns_and_numbers_for_the_rest() -> None:
    x, _, pre = _table()
    frame = xgb.to_frame(x, [True, False], pre.cardinalities)
    assert isinstance(frame["c0"].dtype, pd.CategoricalDtype)
    assert frame["c1"].dtype == np.float32
    np.testing.assert_array_equal(frame["c1"].to_numpy(), x.categorical[:, 1].astype(np.float32))


def test_a_mixed_model_predicts_the_same_after_a_save_and_load(tmp_path: Path) -> None:
    x, y, pre = _table()
    train, val = np.arange(450), np.arange(450, 600)
    trained = xgb.fit(_ctx(pre, compare_native_levels=False), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None and isinstance(trained.model, xgb.XGBModel)
    assert trained.model.native == [True, False]
    pred = trained.model.predict(x.take(val))
    trained.model.save(tmp_path)
    assert json.loads((tmp_path / "xgb.json").read_text())["native"] == [True, False]
    np.testing.assert_allclose(xgb.XGBModel.load(tmp_path, "binary").predict(x.take(val)), pred)


@pytest.mark.parametrize("categorical", [True, False])
def test_a_model_saved_before_the_limit_predicts_as_it_was_trained(tmp_path: Path, categorical: bool) -> None:
    # Saved models then kept one flag for every column ({"categorical": ..., "cardinalities": ...}).
    x, y, pre = _table()
    train, val = np.arange(450), np.arange(450, 600)
    hp = {"max_native_levels": 10_000} if categorical else {"enable_categorical": False}
    trained = xgb.fit(_ctx(pre, **hp), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None and isinstance(trained.model, xgb.XGBModel)
    pred = trained.model.predict(x.take(val))
    trained.model.save(tmp_path)
    (tmp_path / "xgb.json").write_text(json.dumps({"categorical": categorical, "cardinalities": pre.cardinalities}))
    loaded = xgb.XGBModel.load(tmp_path, "binary")
    assert loaded.native == [categorical, categorical]
    np.testing.assert_allclose(loaded.predict(x.take(val)), pred)


@pytest.mark.parametrize(
    ("hp", "cardinalities", "limits"),
    [
        ({}, [3, 200], [32, 200]),  # the limit's way (the wide column as codes), then every column as sets
        ({}, [3, 12], [32]),  # every column under the limit: the limit's way is every column as sets
        ({}, [], [32]),  # no string columns
        ({"compare_native_levels": False}, [3, 200], [32]),
        ({"enable_categorical": False}, [3, 200], [32]),  # every column as codes, by the config's word
        ({"max_native_levels": 0}, [3, 200], [0, 200]),
        (dict(families.XGB.refit_settings), [3, 200], [32]),  # a refit has no validation rows to compare on
    ],
)
def test_the_ways_an_xgb_fit_trains_its_string_columns(
    hp: dict[str, Any], cardinalities: list[int], limits: list[int]
) -> None:
    assert xgb.level_limits(families.XGB.effective(hp), cardinalities) == limits


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_xgb_fit_keeps_the_way_that_scores_best_on_its_validation_rows(seed: int) -> None:
    x, y, pre = _table(seed=seed)
    train, val = np.arange(450), np.arange(450, 600)
    alone = {}
    for limit in xgb.level_limits(families.XGB.effective({}), pre.cardinalities):
        one = xgb.fit(_ctx(pre, max_native_levels=limit, compare_native_levels=False), x.take(train), y[train],
                      x.take(val), y[val])  # fmt: skip
        assert one is not None and isinstance(one.model, xgb.XGBModel) and one.settings_chosen == {}
        assert one.kept_seconds is None
        alone[limit] = xgb.kept_score(one.model.booster, {"val": {"auc": one.curve["val"]}})[1]
    best = max(alone, key=lambda k: (alone[k], -list(alone).index(k)))  # the first of equals
    trained = xgb.fit(_ctx(pre), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None and isinstance(trained.model, xgb.XGBModel)
    assert trained.settings_chosen == {"max_native_levels": best}
    assert trained.kept_seconds is not None and trained.kept_seconds > 0
    assert trained.model.native == xgb.native_columns(families.XGB.effective({}), pre.cardinalities, best)
    way = "as sets" if best >= max(pre.cardinalities) else "of more than 32 levels as codes"
    assert trained.note == f"string columns {way} (best of 2 ways on its validation rows)" and not trained.fallback
