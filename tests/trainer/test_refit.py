"""refitFull (AutoGluon's refit_full): the deployed model trained again on every row, a holdout choosing between the
refits, the bags and LightGBM's defaults alone, both on the leaderboard with their costs, and predict loading the
refit; repeated bagging (bagging.sets) averaging every set's out-of-fold predictions."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pandas as pd
import pytest

from tabjob_trainer import store
from tabjob_trainer.bagging import BaggedModel
from tabjob_trainer.dataset import Prepared, prepare
from tabjob_trainer.leaderboard import build_models, rows_for
from tabjob_trainer.record import FitRecord
from tabjob_trainer.refit import (
    FLOOR,
    Guard,
    Member,
    add_refits,
    bag_confidence,
    refit_hyperparameters,
    refit_seconds,
)
from tests.trainer.helpers import leaderboard, manifest, mixed_table, plan_of, tabjob, write_manifest

pytestmark = pytest.mark.slow

PLAIN = {"learning_rate": 0.1, "feature_fraction": 1.0, "num_boost_round": 100, "early_stopping_rounds": 0}


def _record(best: int | None, hp: dict[str, Any], chosen: dict[str, Any] | None = None) -> FitRecord:
    return FitRecord(id="x", model="GBM", key="GBM", order=0, trial=0, bag_set=0, fold=0, rank=0, ranks=[0], gpus=0,
                     cpus=1, processes=1, hyperparameters=hp, state="Succeeded", best_iteration=best,
                     settings_chosen=chosen or {})  # fmt: skip


def test_a_refit_trains_its_folds_mean_iteration_count_without_early_stopping() -> None:
    hp = {"num_boost_round": 1000, "early_stopping_rounds": 50, "learning_rate": 0.05}
    bag = BaggedModel("GBM", "GBM", "GBM", 0, 0, [_record(80, hp), _record(101, hp), _record(90, hp)])
    refit, n = refit_hyperparameters(bag)
    assert n == 90
    # LightGBM's refit has no validation rows to compare its string columns' ways on.
    assert refit == {"num_boost_round": 90, "early_stopping_rounds": 0, "learning_rate": 0.05,
                     "compare_native_levels": False}  # fmt: skip


@pytest.mark.parametrize(
    ("chosen", "limit"),
    [
        ([{"max_native_levels": 0}, {"max_native_levels": 185}, {"max_native_levels": 185}], 185),  # most folds'
        ([{"max_native_levels": 32}, {"max_native_levels": 0}], 32),  # among equals, the first fold's
        ([{}, {}, {"max_native_levels": 0}], 7),  # folds that compared nothing keep the config's own
    ],
)
def test_a_refit_trains_its_string_columns_the_way_most_folds_kept(chosen: list[dict[str, Any]], limit: int) -> None:
    hp = {"num_boost_round": 1000, "max_native_levels": 7}
    bag = BaggedModel("GBM", "GBM", "GBM", 0, 0, [_record(80, hp, c) for c in chosen])
    refit, _ = refit_hyperparameters(bag)
    assert refit["max_native_levels"] == limit and refit["compare_native_levels"] is False


def test_an_xgb_refit_trains_its_string_columns_the_way_most_folds_kept() -> None:
    hp = {"num_boost_round": 10000, "max_native_levels": 32}
    chosen = [{"max_native_levels": 200}, {"max_native_levels": 32}, {"max_native_levels": 200}]
    bag = BaggedModel("XGB", "XGB", "XGB", 0, 0, [_record(80, hp, c) for c in chosen])
    refit, rounds = refit_hyperparameters(bag)
    assert rounds == 80 and refit["num_boost_round"] == 80 and refit["early_stopping_rounds"] == 0
    assert refit["max_native_levels"] == 200 and refit["compare_native_levels"] is False


def _timed(key: str, best: int, trained: int, seconds: float, kept: float | None, rows: int = 600) -> FitRecord:
    return FitRecord(id="x", model=key, key=key, order=0, trial=0, bag_set=0, fold=0, rank=0, ranks=[0], gpus=0,
                     cpus=1, processes=1, hyperparameters={"num_boost_round": 1000}, state="Succeeded",
                     best_iteration=best, fit_time=seconds, kept_fit_time=kept, rows_train=rows,
                     curve={"metric": "auc", "val": [0.5] * trained})  # fmt: skip


@pytest.mark.parametrize(
    ("key", "folds", "rows", "seconds"),
    [
        # Folds that stopped at their best iteration: the fold's time, scaled to the rows.
        ("GBM", [(100, 100, 6.0, None), (100, 100, 6.0, None)], 900, 9.0),
        # 50 best of 350 trained (an error metric's long patience): a seventh of the fold's time.
        ("GBM", [(50, 350, 14.0, None), (50, 350, 14.0, None)], 600, 2.0),
        # Three ways compared, the kept one trained 4 of the fold's 12 s.
        ("XGB", [(80, 80, 12.0, 4.0), (80, 80, 12.0, 4.0)], 600, 4.0),
        # Folds of different lengths: each scaled to the mean best (60), then averaged.
        ("CAT", [(40, 40, 4.0, None), (80, 80, 8.0, None)], 600, 6.0),
        # Forests train no iteration count: the fold's time, scaled to the rows.
        ("RF", [(1, 1, 3.0, None), (1, 1, 3.0, None)], 1200, 6.0),
    ],
)
def test_a_refits_time_is_estimated_from_its_folds_kept_way_and_iteration_count(
    key: str, folds: list[tuple[int, int, float, float | None]], rows: int, seconds: float
) -> None:
    bag = BaggedModel(key, key, key, 0, 0, [_timed(key, *f) for f in folds])
    assert refit_seconds(bag, rows) == pytest.approx(seconds)
    assert Member(bag, 1.0).cost_estimate(rows) == pytest.approx(seconds)


def test_the_guard_deploys_the_bags_only_on_a_clear_win_and_the_floor_where_it_scores_above() -> None:
    assert Guard(100, 0.8, 0.8, 0.8, "accuracy", 0.5).choice == "refit"  # ties: the simpler model
    assert Guard(100, 0.7, 0.9, None, "accuracy", 0.94).choice == "refit"  # a point lead is not enough
    assert Guard(100, 0.7, 0.9, None, "accuracy", 0.95).choice == "bag"
    assert Guard(100, 0.7, 0.9, 0.8, "accuracy", 0.99).choice == "bag"
    assert Guard(100, 0.7, 0.9, 0.8, "accuracy", 0.5).choice == "floor"  # above the refit that stays
    assert Guard(100, 0.7, 0.75, 0.8, "accuracy", 0.99).choice == "floor"


@pytest.mark.parametrize(("key", "refit"), [("GBM", True), ("CAT", True), ("XGB", True), ("RF", True),
                                             ("NN_TORCH", False), ("TABM", False), ("REALMLP", False)])  # fmt: skip
def test_trees_are_refit_and_networks_keep_their_bags(key: str, refit: bool) -> None:
    bag = BaggedModel(key, key, key, 0, 0, [_record(50, {})])
    assert Member(bag, 1.0).refittable is refit


def _holdout(y: np.ndarray, metric: str, problem: str) -> Prepared:
    """What the guard's scoring reads of a Prepared: the labels, the metric, the problem."""
    return cast(Prepared, SimpleNamespace(y=y, metric=metric, label=SimpleNamespace(problem_type=problem),
                                          n_classes=0))  # fmt: skip


@pytest.mark.parametrize(("metric", "problem"), [("accuracy", "binary"), ("roc_auc", "binary"), ("rmse", "regression")])
def test_bag_confidence_is_the_share_of_resamples_the_bags_win(metric: str, problem: str) -> None:
    draw = np.random.default_rng(0)
    y = draw.integers(0, 2, 400).astype(np.float64)
    rows = np.arange(400)
    good = np.clip(y + draw.normal(0, 0.35, 400), 0, 1)
    noisy = np.clip(y + draw.normal(0, 0.8, 400), 0, 1)
    data = _holdout(y, metric, problem)
    assert bag_confidence(data, rows, refit_pred=noisy, bag_pred=good) > 0.95
    assert bag_confidence(data, rows, refit_pred=good, bag_pred=noisy) < 0.05
    # Two predictions of the same quality: neither side clears the bar.
    twin = np.clip(y + draw.normal(0, 0.35, 400), 0, 1)
    assert 0.05 < bag_confidence(data, rows, refit_pred=good, bag_pred=twin) < 0.95


def _table(tmp: Path, rows: int = 600) -> tuple[Path, Path]:
    df = mixed_table(rows, seed=3)
    df.iloc[: rows * 3 // 4].to_csv(tmp / "train.csv", index=False)
    df.iloc[rows * 3 // 4 :].to_csv(tmp / "test.csv", index=False)
    return tmp / "train.csv", tmp / "test.csv"


def test_run_then_predict_deploys_the_refit_and_shows_both(tmp_path: Path) -> None:
    train, test = _table(tmp_path)
    # A weak network beside the trees: the deployed model holds a tree to refit, and the network keeps its bag.
    models = {"GBM": [{}, {"name": FLOOR, "hyperparameters": PLAIN}], "NN_TORCH": [{"hyperparameters":
              {"num_epochs": 1}}]}  # fmt: skip
    doc = manifest(str(train), "label", models, bagging={"folds": 3}, refitFull=True)
    doc["spec"]["data"]["test"] = str(test)
    out = tmp_path / "out"
    ran = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert ran.returncode == 0, ran.stderr
    rows = {r["model"]: r for r in leaderboard(out)}
    deployed = leaderboard(out)[0]
    full = [n for n in rows if n.endswith("_FULL")]
    assert full, rows  # the deployed model's refit (its members' when it is the ensemble), beside the bags
    assert "NN_TORCH_FULL" not in rows  # a network keeps its bag
    for name in full:  # each with its own inference cost, its bag's score_val and the guard's verdict
        assert rows[name]["predict_ms_per_1000_rows"] > 0 and "guard on 90 held-out rows" in rows[name]["note"]
        if name != "WeightedEnsemble_FULL":
            assert (out / "fits" / "full" / name).is_dir()
            assert rows[name]["score_val"] == rows[name.removesuffix("_FULL")]["score_val"]
    if not deployed["model"].endswith("_FULL"):
        assert all("bag deployed" in rows[n]["note"] for n in full)
    predicted = tabjob("predict", str(out), str(test), "--output", str(tmp_path / "p.csv"))
    assert predicted.returncode == 0, predicted.stderr
    frame = pd.read_csv(tmp_path / "p.csv")
    truth = pd.read_csv(test)["label"]
    accuracy = float((frame["prediction"] == truth).mean())  # the eval metric "auto" is for a binary label
    assert accuracy == pytest.approx(deployed["score_test"], abs=1e-9)  # predict runs what the leaderboard deployed


def test_the_floor_is_deployed_where_the_holdout_finds_the_deployed_model_below_it(tmp_path: Path) -> None:
    """A weak model in the deployed place (one boosting round): without the floor's candidate the run would keep it
    or its refit; the guard finds LightGBM's defaults alone better and deploys their refit on every row."""
    train, _ = _table(tmp_path, 800)
    models = {"GBM": [{"name": "Weak", "hyperparameters": {"num_boost_round": 1, "early_stopping_rounds": 0}},
                      {"name": FLOOR, "hyperparameters": PLAIN}]}  # fmt: skip
    doc = manifest(str(train), "label", models, bagging={"folds": 3}, refitFull=True, ensemble={"size": 0})
    out = tmp_path / "out"
    ran = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert ran.returncode == 0, ran.stderr
    plan = plan_of(tmp_path / "job.yaml")
    data = prepare(str(train), "label", "auto", "auto")
    models_built = build_models(plan, data, out, store.records(out))
    refits = add_refits(out, plan, data, models_built, None, "Weak", None)
    chosen = [r for r in refits if r.extra.get("deployed")]
    assert [r.name for r in chosen] == [FLOOR + "_FULL"]
    assert "GBM_Plain_FULL deployed" in chosen[0].message
    rows = rows_for(models_built + refits, None, data)
    assert rows[0]["model"] == FLOOR + "_FULL"


def test_bag_sets_average_every_sets_out_of_fold_predictions(tmp_path: Path) -> None:
    train, _ = _table(tmp_path, 300)
    doc = manifest(str(train), "label", {"GBM": [{"hyperparameters": {"num_boost_round": 20}}]},
                   bagging={"folds": 2, "sets": 3})  # fmt: skip
    out = tmp_path / "out"
    ran = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert ran.returncode == 0, ran.stderr
    recs = store.records(out)
    assert sorted(recs) == [f"GBM.t0.s{s}.f{f}" for s in range(3) for f in range(2)]
    oof = np.load(out / "oof" / "GBM.npy")
    per_set = []
    for s in range(3):
        pred = np.zeros(len(oof))
        for f in range(2):
            idx = store.array(out, f"GBM.t0.s{s}.f{f}", "val_idx")
            assert idx is not None
            pred[idx] = store.array(out, f"GBM.t0.s{s}.f{f}", "val_pred")
        per_set.append(pred)
    assert np.allclose(oof, np.mean(per_set, axis=0))
    assert not np.allclose(per_set[0], per_set[1])  # each set splits the rows anew
