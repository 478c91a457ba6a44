"""spec.export on a real `tabjob run`: the succeeded job writes the MLServer export into its output, and its
summary (the termination message the operator turns into status.exportPath) names where."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tabjob.contracts.results import RunSummary
from tabjob_trainer.predictor import Predictor
from tests.serving.penguins import LABEL, MODELS
from tests.trainer.helpers import manifest, tabjob, write_manifest

pytestmark = pytest.mark.slow


def test_a_job_with_spec_export_writes_the_export_and_names_it(tmp_path: Path, penguins_run: dict[str, Path]) -> None:
    doc = manifest(str(penguins_run["train"]), LABEL, MODELS, bagging={"folds": 2}, export={"format": "mlserver"})
    doc["metadata"]["name"] = "exported-penguins"
    out, termination = tmp_path / "run", tmp_path / "termination-log"
    termination.touch()
    env = {"TABJOB_TERMINATION_LOG": str(termination)}
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet", env=env)
    assert result.returncode == 0, result.stderr
    summary = RunSummary.model_validate_json(termination.read_text(), by_name=False)
    assert summary.export_path == str(out / "mlserver") and summary.error is None
    settings = json.loads((out / "mlserver" / "model-settings.json").read_text())
    assert settings["name"] == "exported-penguins" and settings["parameters"]["extra"]["model"] == summary.best_model
    rows = pd.read_csv(penguins_run["test"])
    pd.testing.assert_frame_equal(
        Predictor.load(out / "mlserver").predict_frame(rows, "test.csv"),
        Predictor.load(out).predict_frame(rows, "test.csv"),
        check_exact=True,
    )


def test_without_spec_export_nothing_is_exported(penguins_run: dict[str, Path]) -> None:
    assert not (penguins_run["run"] / "mlserver").exists()
