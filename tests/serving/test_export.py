"""`tabjob export --format mlserver`: exactly the files inference needs, V2 metadata per feature column, settings that
MLServer's own models accept, and predictions equal to the run's."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tabjob_trainer.predictor import Predictor, RunFiles
from tabjob_trainer.serving.export import RUNTIME
from tests.serving.penguins import DATATYPES
from tests.trainer.helpers import tabjob

pytestmark = pytest.mark.slow


def _export(run: Path, target: Path, *args: str) -> None:
    result = tabjob("export", str(run), "--format", "mlserver", "--output", str(target), *args)
    assert result.returncode == 0, result.stderr
    assert f"mlserver start {target}" in result.stdout


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_export_holds_exactly_what_inference_needs(tmp_path: Path, penguins_run: dict[str, Path]) -> None:
    run, target = penguins_run["run"], tmp_path / "repo"
    _export(run, target)
    files = RunFiles.read(run)
    fits = files.fits_needed(files.best)
    model_files = {"GBM": "model.txt", "NN_TORCH": "model.pt"}
    expected = {"model-settings.json", "settings.json", "preprocessing.json", "models.json", "leaderboard.json"}
    expected |= {f"fits/{fid}/{model_files[key]}" for fid, key in fits.items()}
    assert _files(target) == expected  # no out-of-fold arrays, fit records, progress or logs
    assert json.loads((target / "settings.json").read_text()) == {"parallel_workers": 0}
    assert set(json.loads((target / "models.json").read_text())) == set(files.models_needed(files.best))


def test_model_settings_advertise_each_feature_and_predicts_columns(
    tmp_path: Path, penguins_run: dict[str, Path]
) -> None:
    from mlserver.settings import ModelSettings

    target = tmp_path / "repo"
    _export(penguins_run["run"], target, "--name", "birds")
    settings = ModelSettings.parse_file(str(target / "model-settings.json"))
    assert settings.name == "birds" and settings.implementation_ == RUNTIME
    assert settings.parameters is not None and settings.parameters.content_type == "pd"
    types = {t.name: t.datatype for t in settings.inputs}
    assert types == DATATYPES
    outputs = [(t.name, t.datatype) for t in settings.outputs]
    assert outputs == [
        ("prediction", "BYTES"),
        ("proba_Adelie", "FP64"),
        ("proba_Chinstrap", "FP64"),
        ("proba_Gentoo", "FP64"),
    ]
    assert settings.implementation.__name__ == "TabjobRuntime"  # MLServer can import the runtime it names


@pytest.mark.parametrize("model", [None, "NN_TORCH"])
def test_the_export_predicts_what_the_run_predicts(
    tmp_path: Path, penguins_run: dict[str, Path], model: str | None
) -> None:
    target = tmp_path / "repo"
    _export(penguins_run["run"], target, *(["--model", model] if model else []))
    rows = pd.read_csv(penguins_run["test"])
    exported = Predictor.load(target)
    assert exported.model == (model or RunFiles.read(penguins_run["run"]).best)
    want = Predictor.load(penguins_run["run"], model).predict_frame(rows, "test.csv")
    pd.testing.assert_frame_equal(exported.predict_frame(rows, "test.csv"), want, check_exact=True)
    settings = json.loads((target / "model-settings.json").read_text())
    assert settings["name"] == "penguins" and settings["parameters"]["extra"]["model"] == exported.model


def test_an_earlier_export_is_replaced_and_other_directories_are_refused(
    tmp_path: Path, penguins_run: dict[str, Path]
) -> None:
    target = tmp_path / "repo"
    _export(penguins_run["run"], target, "--model", "NN_TORCH")
    _export(penguins_run["run"], target, "--model", "GBM")
    assert not any(p.name.startswith("NN_TORCH") for p in (target / "fits").iterdir())
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"meow")
    refused = tabjob("export", str(penguins_run["run"]), "--format", "mlserver", "--output", str(other))
    assert refused.returncode == 1
    assert "is not empty and not an earlier tabjob export" in refused.stderr
    assert _files(other) == {"cat.jpg"} and not list(tmp_path.glob(".tmp-*"))


def test_bad_names_and_models_are_refused_naming_the_flag(tmp_path: Path, penguins_run: dict[str, Path]) -> None:
    bad = tabjob("export", str(penguins_run["run"]), "-f", "mlserver", "-o", str(tmp_path / "a"), "--name", "a/b")
    assert bad.returncode == 1 and "--name 'a/b'" in bad.stderr
    unknown = tabjob("export", str(penguins_run["run"]), "-f", "mlserver", "-o", str(tmp_path / "b"), "--model", "X")
    assert unknown.returncode == 1 and "no model 'X'; choose one of" in unknown.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
