"""Load once, predict many: a loaded run predicts without its directory, from several threads at once."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from tabjob_trainer.errors import DataError
from tabjob_trainer.predictor import Predictor, RunFiles
from tests.trainer.helpers import tabjob

pytestmark = pytest.mark.slow


def test_predicting_reads_no_file_once_loaded(tmp_path: Path, penguins_run: dict[str, Path]) -> None:
    rows = pd.read_csv(penguins_run["test"])
    copy = tmp_path / "run"
    shutil.copytree(penguins_run["run"], copy)
    for model in ("GBM", "NN_TORCH", "WeightedEnsemble"):
        loaded = Predictor.load(copy, model)
        expected = Predictor.load(penguins_run["run"], model).predict_frame(rows, "test.csv")
        shutil.move(copy, tmp_path / "gone")  # the run directory is no longer there
        pd.testing.assert_frame_equal(loaded.predict_frame(rows, "test.csv"), expected, check_exact=True)
        shutil.move(tmp_path / "gone", copy)


def test_only_the_chosen_models_fits_are_loaded(penguins_run: dict[str, Path]) -> None:
    files = RunFiles.read(penguins_run["run"])
    gbm = Predictor.load(penguins_run["run"], "GBM")
    assert set(gbm.fits) == set(files.index["GBM"]["fits"])
    ensemble = Predictor.load(penguins_run["run"], "WeightedEnsemble")
    members = files.index["WeightedEnsemble"]["weights"]
    assert set(ensemble.fits) == {fid for m in members for fid in files.index[m]["fits"]}


@pytest.mark.parametrize("model", ["NN_TORCH", "WeightedEnsemble", "GBM"])
def test_many_threads_get_exactly_the_serial_answers(penguins_run: dict[str, Path], model: str) -> None:
    rows = pd.read_csv(penguins_run["test"])
    loaded = Predictor.load(penguins_run["run"], model)
    # Different slices per call, so a prediction leaking into another thread's answer would show.
    slices = [rows.iloc[i % 7 :: 3].reset_index(drop=True) for i in range(24)]
    serial = [loaded.predict_frame(s, "test.csv") for s in slices]
    with ThreadPoolExecutor(max_workers=8) as pool:
        parallel = list(pool.map(lambda s: loaded.predict_frame(s, "test.csv"), slices))
    for got, want in zip(parallel, serial, strict=True):
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_an_unknown_model_name_is_refused_at_load(penguins_run: dict[str, Path]) -> None:
    with pytest.raises(DataError, match=r"no model 'XGB'; choose one of GBM, NN_TORCH, WeightedEnsemble"):
        Predictor.load(penguins_run["run"], "XGB")


def test_tabjob_predict_writes_what_the_loaded_run_predicts(tmp_path: Path, penguins_run: dict[str, Path]) -> None:
    target = tmp_path / "p.csv"
    result = tabjob("predict", str(penguins_run["run"]), str(penguins_run["test"]), "--output", str(target))
    assert result.returncode == 0, result.stderr
    written = pd.read_csv(target)
    expected = Predictor.load(penguins_run["run"]).predict_frame(pd.read_csv(penguins_run["test"]), "test.csv")
    assert list(written.columns) == ["prediction", "proba_Adelie", "proba_Chinstrap", "proba_Gentoo"]
    pd.testing.assert_frame_equal(written, expected, check_exact=True, check_dtype=False)
