"""Real `tabjob run` jobs: torchrun with 2 ranks on the CPU, a gloo process group, real LightGBM and torch fits."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tabjob.contracts.results import FitEvent
from tabjob.families import NN_TORCH
from tests.trainer.helpers import events, leaderboard, manifest, mixed_table, records, tabjob, write_manifest

pytestmark = pytest.mark.slow

SMALL_NN = {"num_epochs": 8, "patience": 3, "hidden_size": 32}
SMALL_GBM = {"num_boost_round": 60, "learning_rate": 0.1}
# A network fit of a few seconds: each rank waits for its own torch warm-up before its first network fit, so the two
# ranks start their folds up to a second apart, and folds of a few milliseconds need not overlap even when parallel.
OVERLAPPING_NN = {"num_epochs": 300, "patience": 300, "hidden_size": 32}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("data")
    mixed_table(600, seed=1).to_csv(base / "train.csv", index=False)
    mixed_table(200, seed=2).to_parquet(base / "test.parquet")
    # New rows whose colours were never seen in training, and a missing value in every column.
    new = mixed_table(40, seed=3, colours=("purple", "orange", "red")).drop(columns=["label"])
    new.loc[0, ["x1", "x2", "colour"]] = [None, None, None]
    new.to_csv(base / "new.csv", index=False)
    return {"train": base / "train.csv", "test": base / "test.parquet", "new": base / "new.csv"}


def test_parallel_folds_across_two_ranks_then_predict_unseen_categories(tmp_path: Path, table: dict[str, Path]) -> None:
    doc = manifest(
        str(table["train"]),
        "label",
        {"GBM": [{"hyperparameters": SMALL_GBM}], "NN_TORCH": [{"hyperparameters": OVERLAPPING_NN}]},
        resources={"cpus": 2, "cpusPerPod": 1},
        bagging={"folds": 2},
    )
    doc["spec"]["data"]["test"] = str(table["test"])
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    rows = leaderboard(out)
    assert {r["model"] for r in rows} == {"GBM", "NN_TORCH", "WeightedEnsemble"}
    assert all(r["state"] == "Succeeded" and r["score_test"] is not None for r in rows)
    assert rows[0]["score_val"] >= rows[-1]["score_val"]  # best first
    # Inference cost per model: every fold model predicts every new row; the ensemble runs the members it weighs.
    cost = {r["model"]: r["predict_ms_per_1000_rows"] for r in rows}
    assert cost["GBM"] > 0 and cost["NN_TORCH"] > 0
    weighed = [cost[m] for m in next(r for r in rows if r["model"] == "WeightedEnsemble")["weights"]]
    assert cost["WeightedEnsemble"] == pytest.approx(sum(weighed), abs=0.002)
    # The two folds of each model ran at the same time on different ranks.
    recs = records(out)
    assert {recs[f"{m}.t0.s0.f{f}"].rank for m in ("GBM", "NN_TORCH") for f in (0, 1)} == {0, 1}
    starts = {e.fit: e.t for e in events(out) if e.event == "FitStarted"}
    ends = {e.fit: e.t for e in events(out) if e.event == "FitEnded" and e.state == "Succeeded"}
    assert (
        starts["NN_TORCH.t0.s0.f1"] < ends["NN_TORCH.t0.s0.f0"]
        and starts["NN_TORCH.t0.s0.f0"] < ends["NN_TORCH.t0.s0.f1"]
    )
    for name in ("leaderboard.csv", "plan.json", "metrics.json", "models.json", "preprocessing.json"):
        assert (out / name).exists(), name
    assert (out / "oof" / "GBM.npy").exists()
    # Every line both ranks wrote to progress.jsonl is one FitEvent: the progress stream has one typed spelling.
    lines = (out / "progress.jsonl").read_text().splitlines()
    parsed = [FitEvent.model_validate_json(line) for line in lines]
    assert len(parsed) == len(lines) and {e.rank for e in parsed} == {0, 1}
    kinds = [e.event for e in parsed]
    assert kinds.count("JobStarted") == kinds.count("JobEnded") == 1 and kinds.count("FitEnded") == 4

    predicted = tabjob("predict", str(out), str(table["new"]), "--output", str(tmp_path / "p.csv"))
    assert predicted.returncode == 0, predicted.stderr
    frame = pd.read_csv(tmp_path / "p.csv")
    assert list(frame.columns) == ["prediction", "proba_no", "proba_yes"]
    assert len(frame) == 40 and set(frame["prediction"]) <= {"yes", "no"}
    assert frame[["proba_no", "proba_yes"]].sum(axis=1).round(6).eq(1).all()

    report = tabjob("report", str(out))
    assert report.returncode == 0, report.stderr
    assert {p.name for p in (out / "report").iterdir()} >= {"index.html", "leaderboard.png", "learning_curves.png"}


def test_ddp_mlp_over_two_ranks(tmp_path: Path, table: dict[str, Path]) -> None:
    doc = manifest(
        str(table["train"]),
        "label",
        {"NN_TORCH": [{"processes": 2, "hyperparameters": {**SMALL_NN, "lr_scaling": "linear"}}]},
        ensemble={"size": 0},
    )
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    (rec,) = records(out).values()
    assert rec.state == "Succeeded" and rec.ranks == [0, 1]
    assert rec.extra["world"] == 2
    assert rec.extra["learning_rate"] == pytest.approx(2 * NN_TORCH.defaults["learning_rate"])  # linear, 2 ranks
    assert leaderboard(out)[0]["score_val"] > 0.75


def test_data_parallel_lightgbm_over_two_ranks(tmp_path: Path, table: dict[str, Path]) -> None:
    doc = manifest(
        str(table["train"]), "label", {"GBM": [{"processes": 2, "hyperparameters": SMALL_GBM}]}, ensemble={"size": 0}
    )
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    (rec,) = records(out).values()
    assert rec.state == "Succeeded" and rec.ranks == [0, 1]
    # Each rank trained on half of the rows of the stratified holdout's training part.
    assert rec.rows_train == 480
    assert leaderboard(out)[0]["score_val"] > 0.75


def test_one_failing_fit_is_recorded_and_the_rest_go_on(tmp_path: Path, table: dict[str, Path]) -> None:
    doc = manifest(
        str(table["train"]),
        "label",
        {"GBM": [{"hyperparameters": SMALL_GBM}, {"name": "Broken", "hyperparameters": {"num_leaves": -3}}]},
    )
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    rows = {r["model"]: r for r in leaderboard(out)}
    assert rows["GBM"]["state"] == "Succeeded"
    assert rows["Broken"]["state"] == "Failed" and "LightGBMError" in rows["Broken"]["note"]
    assert rows["WeightedEnsemble"]["weights"] == {"GBM": 1.0}
    assert "Broken" in result.stdout  # the table shows it, with its error below


def test_missing_label_column_is_one_clear_line(tmp_path: Path, table: dict[str, Path]) -> None:
    doc = manifest(str(table["train"]), "class", {"GBM": [{"hyperparameters": SMALL_GBM}]})
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(tmp_path / "run"), "--quiet")
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert str(table["train"]) in lines[0] and "'class'" in lines[0]


def test_gpu_plan_without_gpu_fails_with_one_line_unless_fallback(tmp_path: Path, table: dict[str, Path]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU; the no-GPU paths cannot be seen here")
    models = {"GBM": [{"hyperparameters": SMALL_GBM}], "NN_TORCH": [{"hyperparameters": SMALL_NN}]}
    doc = manifest(str(table["train"]), "label", models, resources={"cpus": 2, "gpus": 1})
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(tmp_path / "a"), "--quiet")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "FallbackToCPU" in result.stderr

    doc["spec"]["onGpuUnavailable"] = "FallbackToCPU"
    out = tmp_path / "b"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    rows = {r["model"]: r for r in leaderboard(out)}
    for model in ("GBM", "NN_TORCH"):
        assert rows[model]["state"] == "Succeeded" and rows[model]["device"] == "cpu"
        assert rows[model]["note"].startswith("FallbackToCPU"), rows[model]


def test_time_limit_stops_training_and_skips_what_cannot_start(tmp_path: Path, table: dict[str, Path]) -> None:
    endless = {"num_epochs": 100000, "patience": 100000, "hidden_size": 16}
    doc = manifest(
        str(table["train"]),
        "label",
        {
            "GBM": [{"hyperparameters": SMALL_GBM}],
            "NN_TORCH": [{"hyperparameters": endless}, {"name": "Late", "hyperparameters": SMALL_NN}],
        },
        timeLimitSeconds=15,
    )
    out = tmp_path / "run"
    message = tmp_path / "termination-log"
    result = tabjob(
        "run",
        str(write_manifest(tmp_path, doc)),
        "--output-dir",
        str(out),
        "--quiet",
        env={"TABJOB_TERMINATION_LOG": str(message)},
    )
    assert result.returncode == 0, result.stderr
    # What the operator reads into status when this runs in a pod.
    summary = json.loads(message.read_text())
    assert summary["fitsTotal"] == 3 and summary["fitsDone"] + summary["fitsSkipped"] == 3
    assert {m["name"]: m["state"] for m in summary["models"]}["Late"] == "Skipped"
    assert summary["bestModel"] == leaderboard(out)[0]["model"]
    rows = {r["model"]: r for r in leaderboard(out)}
    assert rows["GBM"]["state"] == "Succeeded"
    # Stopped at the deadline with its best epoch kept; on a badly overloaded machine it may not start at all.
    assert rows["NN_TORCH"]["state"] in ("Succeeded", "Skipped")
    assert rows["Late"]["state"] == "Skipped" and "time limit of 15 s" in rows["Late"]["note"]
    recs = records(out)
    assert recs["Late.t0"].state == "Skipped"
