"""The catalogue of hostile inputs (tests/trainer/hostile/): through the real CLI, each gives exactly one line.

`tabjob run` also leaves error.json with the same message (what a pod's termination message carries), and
`tabjob predict` never writes a partial CSV.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from tests.trainer.helpers import manifest, tabjob, write_manifest

pytestmark = pytest.mark.slow

HOSTILE = Path(__file__).parent / "hostile"
CATALOGUE: dict[str, list[dict[str, Any]]] = yaml.safe_load((HOSTILE / "catalogue.yaml").read_text())
SMALL_GBM = {"num_boost_round": 20}


def _path(entry: dict[str, Any]) -> str:
    name = str(entry["file"])
    return name if "://" in name else str(HOSTILE / name)


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    return lines[0].removeprefix("error: ")


@pytest.mark.parametrize("entry", CATALOGUE["run"], ids=[str(e["file"]) for e in CATALOGUE["run"]])
def test_run_refuses_hostile_data_in_one_line(tmp_path: Path, entry: dict[str, Any]) -> None:
    data = _path(entry)
    doc = manifest(data, "y", {"GBM": [{"hyperparameters": SMALL_GBM}]}, bagging={"folds": 2})
    if "problemType" in entry:
        doc["spec"]["data"]["problemType"] = entry["problemType"]
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    expected = str(entry["error"]).format(file=data)
    assert result.returncode != 0
    assert _one_error_line(result.stderr) == expected
    assert json.loads((out / "error.json").read_text())["error"] == expected
    assert not (out / "leaderboard.json").exists()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("run")
    clean = pd.read_csv(HOSTILE / "inf_feature.csv").replace([float("inf"), float("-inf")], 0.0)
    clean.to_csv(base / "train.csv", index=False)
    doc = manifest(str(base / "train.csv"), "y", {"GBM": [{"hyperparameters": SMALL_GBM}]}, bagging={"folds": 2})
    out = base / "out"
    result = tabjob("run", str(write_manifest(base, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("entry", CATALOGUE["predict"], ids=[str(e["file"]) for e in CATALOGUE["predict"]])
def test_predict_refuses_hostile_data_in_one_line(tmp_path: Path, finished_run: Path, entry: dict[str, Any]) -> None:
    target = tmp_path / "p.csv"
    result = tabjob("predict", str(finished_run), _path(entry), "--output", str(target))
    assert result.returncode == 1
    assert _one_error_line(result.stderr) == str(entry["error"]).format(file=_path(entry))
    assert not target.exists()


def test_predict_output_must_be_a_file_in_an_existing_directory(tmp_path: Path, finished_run: Path) -> None:
    data = str(HOSTILE / "utf8.csv")
    result = tabjob("predict", str(finished_run), data, "--output", str(tmp_path))
    assert _one_error_line(result.stderr) == (
        f"--output {tmp_path}: is a directory; name the CSV file to write, e.g. {tmp_path / 'predictions.csv'}"
    )
    missing = tmp_path / "nope" / "p.csv"
    result = tabjob("predict", str(finished_run), data, "--output", str(missing))
    assert _one_error_line(result.stderr) == f"--output {missing}: directory {tmp_path / 'nope'} does not exist"


def test_output_dir_naming_a_file_is_one_line(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("not a directory")
    doc = manifest(str(HOSTILE / "utf8.csv"), "y", {"GBM": [{"hyperparameters": SMALL_GBM}]})
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(taken), "--quiet")
    assert result.returncode == 1
    assert _one_error_line(result.stderr) == (
        f"--output-dir {taken}: is a file, not a directory; name a directory (it is created if missing)"
    )
    assert taken.read_text() == "not a directory"


def test_a_rank_that_finds_bad_data_first_leaves_the_one_line_too(tmp_path: Path) -> None:
    # Under load, rank 1 once found the infinite value, exited, and torchrun stopped rank 0 before rank 0 had written
    # error.json: `tabjob run` then showed torchrun's report instead of the reason. Every rank now writes it.
    from tabjob_trainer.job import EXIT_BAD_INPUT, _bad_data

    line = "data.csv: column 'x2' holds 1 infinite value(s), first in data row 4"
    assert _bad_data(tmp_path, 1, line) == EXIT_BAD_INPUT
    assert json.loads((tmp_path / "error.json").read_text()) == {"error": line, "class": "DataError",
                                                                 "reason": "InvalidData"}  # fmt: skip
