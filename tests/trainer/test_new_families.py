"""The families AutoGluon trains that tabjob lacked: RF and XT (scikit-learn), KNN, and RealMLP (pytabkit).

Each trains, predicts, saves and loads back to the same predictions on a table with string columns and missing
values, for every problem type; its declared parameter names are the library's own; RealMLP's GPU variant runs
where a CUDA device is (skipped with the reason elsewhere); a saved model is never unpickled beyond what it may hold.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tabjob import families
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.models.registry import family
from tabjob_trainer.problem import ProblemType
from tests.trainer.test_quality_models import CASES, _table

SHORT: dict[str, dict[str, Any]] = {"RF": {"n_estimators": 25}, "XT": {"n_estimators": 25}, "KNN": {},
                                    "REALMLP": {"n_epochs": 4}}  # fmt: skip


def _ctx(key: str, problem: ProblemType, n_classes: int, metric: str, pre: Any, device: str = "cpu") -> FitContext:
    return FitContext(fit_id="t", hyperparameters=SHORT[key], seed=0, threads=1, device=device, problem=problem,
                      n_classes=n_classes, metric=metric, feature_names=pre.feature_names,
                      cardinalities=pre.cardinalities)  # fmt: skip


@pytest.mark.parametrize("key", sorted(SHORT))
@pytest.mark.parametrize(("problem", "n_classes", "metric"), CASES)
def test_trains_predicts_and_loads_back(
    tmp_path: Path, key: str, problem: ProblemType, n_classes: int, metric: str
) -> None:
    x, y, pre = _table(160, problem)
    train, val = np.arange(120), np.arange(120, 160)
    fam = family(key)
    trained = fam.fit(_ctx(key, problem, n_classes, metric, pre), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None
    pred = trained.model.predict(x.take(val))
    assert pred.shape == ((40, n_classes) if problem == "multiclass" else (40,))
    assert np.isfinite(pred).all()
    if problem == "multiclass":
        assert np.allclose(pred.sum(axis=1), 1.0)
    trained.model.save(tmp_path)
    assert not list(tmp_path.glob("*.pkl"))
    loaded = fam.load(tmp_path, problem)
    assert np.allclose(loaded.predict(x.take(val)), pred, atol=1e-6)


def test_forest_predictions_are_scikit_learns_own() -> None:
    from sklearn.ensemble import RandomForestClassifier

    from tabjob_trainer.models.gbm import to_matrix

    x, y, pre = _table(200, "multiclass")
    trained = family("RF").fit(_ctx("RF", "multiclass", 3, "accuracy", pre), x, y, x, y)
    assert trained is not None
    theirs = RandomForestClassifier(**families.RF.effective(SHORT["RF"]), n_jobs=1, random_state=0)
    theirs.fit(to_matrix(x), y)
    assert np.allclose(trained.model.predict(x), theirs.predict_proba(to_matrix(x)))


def test_declared_parameter_names_are_the_librarys() -> None:
    from pytabkit.models.sklearn.sklearn_interfaces import RealMLPConstructorMixin
    from sklearn import ensemble
    from sklearn.neighbors import KNeighborsClassifier

    own = {"n_jobs", "random_state", "verbose", "warm_start", "oob_score"}
    for kind in ("RandomForest", "ExtraTrees"):
        names = {n for task in ("Classifier", "Regressor") for n in getattr(ensemble, kind + task)().get_params()}
        assert families.RF.hyperparameter_names == families.XT.hyperparameter_names == names - own
    assert families.KNN.hyperparameter_names == set(KNeighborsClassifier().get_params()) - {"n_jobs", "metric_params"}
    realmlp = set(inspect.signature(RealMLPConstructorMixin.__init__).parameters) - {"self"}
    tabjobs = {"device", "random_state", "n_cv", "n_refit", "n_repeats", "val_fraction", "n_threads", "tmp_folder",
               "verbosity", "use_best_mean_epoch_for_cv"}  # fmt: skip
    assert families.REALMLP.hyperparameter_names == realmlp - tabjobs
    for f in (families.RF, families.XT, families.KNN, families.REALMLP):
        assert f.hyperparameter_names is not None
        assert set(f.defaults) | set(f.search_space) <= f.hyperparameter_names, f.key


def test_a_realmlp_file_naming_anything_else_is_refused(tmp_path: Path) -> None:
    x, y, pre = _table(120, "binary")
    trained = family("REALMLP").fit(_ctx("REALMLP", "binary", 2, "roc_auc", pre), x, y, x, y)
    assert trained is not None
    trained.model.save(tmp_path)
    torch.save({"boom": Path("/etc/passwd")}, tmp_path / "realmlp.pt")  # names pathlib.PosixPath
    with pytest.raises(ValueError, match=r"names pathlib\.PosixPath"):
        family("REALMLP").load(tmp_path, "binary")


def test_refit_trains_the_given_epochs_and_keeps_them(tmp_path: Path) -> None:
    x, y, pre = _table(160, "binary")
    ctx = _ctx("REALMLP", "binary", 2, "roc_auc", pre)
    ctx.hyperparameters = {"n_epochs": 6, "stop_epoch": 3}
    ctx.refit = True
    trained = family("REALMLP").fit(ctx, x, y, x.take(np.arange(20)), y[:20])
    assert trained is not None and trained.best_iteration == 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: RealMLP's GPU variant needs one")
def test_realmlp_trains_on_the_gpu(tmp_path: Path) -> None:
    x, y, pre = _table(200, "multiclass")
    trained = family("REALMLP").fit(_ctx("REALMLP", "multiclass", 3, "accuracy", pre, "cuda:0"), x, y, x, y)
    assert trained is not None and trained.device == "cuda:0"
    trained.model.save(tmp_path)
    assert np.allclose(family("REALMLP").load(tmp_path, "multiclass").predict(x), trained.model.predict(x), atol=1e-5)
