"""What the model families do for quality: every portfolio config, early stopping, the MLP's own preprocessing."""

from __future__ import annotations

from typing import Any

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

from tabjob import families
from tabjob_trainer.metrics import score
from tabjob_trainer.models import gbm, mlp, network
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.models.mlp_inputs import apply_numeric, fit_numeric
from tabjob_trainer.models.registry import family
from tabjob_trainer.preprocess import Encoded, Preprocessor
from tabjob_trainer.problem import ProblemType


def _ctx(problem: ProblemType, n_classes: int, metric: str, pre: Preprocessor, hp: dict[str, Any]) -> FitContext:
    return FitContext(
        fit_id="t",
        hyperparameters=hp,
        seed=0,
        threads=1,
        device="cpu",
        problem=problem,
        n_classes=n_classes,
        metric=metric,
        feature_names=pre.feature_names,
        cardinalities=pre.cardinalities,
    )


def _table(n: int, problem: str, seed: int = 0) -> tuple[Encoded, np.ndarray, Preprocessor]:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "skewed": rng.lognormal(sigma=2.0, size=n),
            "colour": rng.choice(["red", "green", "blue", "grey"], size=n),
        }
    )
    df.loc[rng.random(n) < 0.1, "x"] = np.nan
    signal = np.nan_to_num(df["x"].to_numpy()) + (df["colour"] == "red") - 0.2 * np.log(df["skewed"])
    if problem == "regression":
        y = signal + rng.normal(scale=0.3, size=n)
    elif problem == "binary":
        y = (signal > 0).astype(np.int64)
    else:
        y = np.digitize(signal, [-0.5, 0.5]).astype(np.int64)
    pre = Preprocessor.fit(df, "none")
    return pre.transform(df), np.asarray(y, dtype=np.float64 if problem == "regression" else np.int64), pre


CASES = [("binary", 2, "roc_auc"), ("multiclass", 3, "accuracy"), ("regression", 0, "rmse")]


# Each portfolio config, capped to a few rounds or epochs so that the whole table of them stays quick.
SHORT = {"GBM": {"num_boost_round": 60}, "CAT": {"iterations": 60}, "XGB": {"num_boost_round": 60},
         "NN_TORCH": {"num_epochs": 3}, "TABM": {"num_epochs": 3}, "RF": {"n_estimators": 30},
         "XT": {"n_estimators": 30}, "KNN": {}, "REALMLP": {"n_epochs": 3}}  # fmt: skip
PORTFOLIO = [
    (f.key, name, dict(hp)) for f in families.FAMILIES.values() for name, hp in (*f.portfolio, *filter(None, [f.floor]))
]


@pytest.mark.parametrize(("key", "name", "hp"), PORTFOLIO, ids=[name for _, name, _ in PORTFOLIO])
@pytest.mark.parametrize(("problem", "n_classes", "metric"), CASES)
def test_every_portfolio_config_trains_on_a_tiny_table(
    key: str, name: str, hp: dict[str, Any], problem: ProblemType, n_classes: int, metric: str
) -> None:
    x, y, pre = _table(120, problem)
    train, val = np.arange(80), np.arange(80, 120)
    short = {k: min(v, hp.get(k, v)) for k, v in SHORT[key].items()}
    trained = family(key).fit(_ctx(problem, n_classes, metric, pre, {**hp, **short}), x.take(train), y[train],
                              x.take(val), y[val])  # fmt: skip
    assert trained is not None
    pred = trained.model.predict(x.take(val))
    assert np.isfinite(pred).all()
    assert pred.shape == ((40, n_classes) if problem == "multiclass" else (40,))
    assert score(metric, problem, y[val], pred, n_classes) > (0.5 if problem == "binary" else -10.0)


def _floor() -> dict[str, Any]:
    assert families.GBM.floor is not None
    return dict(families.GBM.floor[1])


def test_the_portfolio_holds_lightgbms_own_defaults() -> None:
    """The deployed model is chosen against a plain LGBMClassifier/LGBMRegressor: its config is in the pool."""
    plain = _floor()
    defaults = lgb.LGBMClassifier().get_params()
    assert plain["learning_rate"] == defaults["learning_rate"]
    assert plain["num_leaves"] == defaults["num_leaves"]
    assert plain["min_data_in_leaf"] == defaults["min_child_samples"]
    assert plain["num_boost_round"] == defaults["n_estimators"]
    assert plain["feature_fraction"] == defaults["colsample_bytree"]


def test_gbm_early_stopping_stops_on_the_validation_fold() -> None:
    x, y, pre = _table(400, "binary")
    y = np.random.default_rng(1).integers(0, 2, size=len(y))  # noise: the validation loss soon stops improving
    train, val = np.arange(300), np.arange(300, 400)
    hp = {"num_boost_round": 1000, "early_stopping_rounds": 5, "adaptive_patience": 0}  # the fixed patience
    trained = gbm.fit(_ctx("binary", 2, "roc_auc", pre, hp), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None
    rounds = len(trained.curve["val"])
    assert rounds < 1000
    assert rounds == trained.best_iteration + 5


def test_gbm_without_early_stopping_trains_every_round() -> None:
    x, y, pre = _table(200, "binary")
    train, val = np.arange(150), np.arange(150, 200)
    trained = gbm.fit(
        _ctx("binary", 2, "roc_auc", pre, _floor()),
        x.take(train),
        y[train],
        x.take(val),
        y[val],
    )
    assert trained is not None and len(trained.curve["val"]) == 100


def test_mlp_early_stopping_stops_after_its_patience() -> None:
    x, y, pre = _table(300, "binary")
    y = np.random.default_rng(2).integers(0, 2, size=len(y))
    train, val = np.arange(200), np.arange(200, 300)
    hp = {"num_epochs": 500, "patience": 3, "adaptive_patience": 0.0, "hidden_size": 16, "num_layers": 2}
    trained = mlp.fit(_ctx("binary", 2, "roc_auc", pre, hp), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None
    epochs = len(trained.curve["val"])
    assert epochs < 500
    assert epochs == trained.best_iteration + 3


def test_patience_grows_with_the_best_epoch() -> None:
    assert network.patience_left(0, 20, 0.5) == 20
    assert network.patience_left(100, 20, 0.5) == 70
    assert network.auto_batch(300) == 32 and network.auto_batch(5000) == 64 and network.auto_batch(10**7) == 512


def test_mlp_predicts_unseen_categories_and_missing_values() -> None:
    x, y, pre = _table(300, "multiclass")
    train, val = np.arange(200), np.arange(200, 300)
    hp = {"num_epochs": 5, "hidden_size": 16, "num_layers": 2}
    trained = mlp.fit(_ctx("multiclass", 3, "accuracy", pre, hp), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None
    new = pre.transform(pd.DataFrame({"x": [np.nan, 1e9], "skewed": [np.nan, -5.0], "colour": ["purple", None]}))
    assert new.categorical.tolist() == [[-1], [-1]]
    proba = trained.model.predict(new)
    assert proba.shape == (2, 3) and np.isfinite(proba).all()
    assert np.allclose(proba.sum(axis=1), 1.0, atol=1e-5)


def test_mlp_regression_stays_within_the_training_range() -> None:
    x, y, pre = _table(300, "regression")
    train, val = np.arange(200), np.arange(200, 300)
    hp = {"num_epochs": 5, "hidden_size": 16, "num_layers": 2}
    trained = mlp.fit(_ctx("regression", 0, "rmse", pre, hp), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None
    far = Encoded(np.array([[1e6, 1e6], [-1e6, 1e-9]], dtype=np.float32), np.array([[0], [1]]))
    pred = trained.model.predict(far)
    low, high = y[train].min(), y[train].max()
    margin = 0.05 * (high - low)
    assert np.all(pred >= low - margin - 1e-5) and np.all(pred <= high + margin + 1e-5)  # float32 outputs


def test_skewed_columns_are_quantile_mapped_and_missing_values_flagged() -> None:
    rng = np.random.default_rng(0)
    skewed = rng.lognormal(sigma=2.0, size=2000)
    plain = rng.normal(loc=5.0, scale=3.0, size=2000)
    numeric = np.column_stack([skewed, plain]).astype(np.float32)
    numeric[:100, 1] = np.nan
    stats = fit_numeric(numeric, skew_threshold=0.99)
    assert stats["quantiles"][0] and not stats["quantiles"][1]  # only the skewed column is quantile-mapped
    assert stats["missing_columns"] == [1]
    out = apply_numeric(stats, numeric)
    assert out.shape == (2000, 3)
    assert abs(out[:, 0].mean()) < 0.05 and abs(out[:, 0].std() - 1.0) < 0.05  # a standard normal
    assert np.all(np.diff(out[np.argsort(skewed), 0]) >= 0)  # order kept
    assert out[:100, 2].tolist() == [1.0] * 100 and out[100:, 2].sum() == 0
    assert out[:100, 1].tolist() == pytest.approx([(np.nanmedian(numeric[:, 1]) - 5.0) / 3.0] * 100, abs=0.1)
    extreme = apply_numeric(stats, np.array([[1e30, np.nan], [-1e30, 0.0]], dtype=np.float32))
    assert np.isfinite(extreme).all() and np.abs(extreme[:, 0]).max() < 4.0
