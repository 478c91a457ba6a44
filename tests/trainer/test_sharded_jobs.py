"""Sharded jobs under real torchrun (`tabjob run`, gloo on the CPU): GBM and XGB data-parallel over three ranks, each
rank reading only its row groups; the same stopping round on every rank, by the metric or by the time; out-of-fold
predictions joined by row index; the scores within 0.5% of the same configuration trained in one process on the same
rows; the memory refusal before a row is read; a table too coarse to split read whole, saying why."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tabjob.planner.sharding import assign
from tabjob_trainer.metrics import score
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.models.registry import family
from tabjob_trainer.sharded import rows
from tabjob_trainer.sharded.load import Alone
from tabjob_trainer.sharded.prepare import prepare_sharded
from tabjob_trainer.storage.datasets import open_dataset
from tests.trainer.helpers import leaderboard, manifest, records, tabjob, write_manifest
from tests.trainer.sharded_helpers import mixed_frame, write_dataset

pytestmark = pytest.mark.slow

SMALL = {"num_boost_round": 80, "learning_rate": 0.1}
THREE = {"processes": 3, "resources": {"cpus": 3}, "hyperparameters": SMALL}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("sharded")
    return {
        "train": write_dataset(mixed_frame(4800, seed=11), base / "train", files=4, row_group_rows=400),
        "test": write_dataset(mixed_frame(900, seed=12), base / "test", files=3, row_group_rows=300),
    }


def sharded_job(tmp_path: Path, train: str, models: dict[str, Any], **spec: Any) -> dict[str, Any]:
    spec = {"resources": {"cpus": 3, "cpusPerPod": 1}, "bagging": {"folds": 3}, **spec}
    doc = manifest(train, "label", models, **spec)
    doc["spec"]["data"]["evalMetric"] = "roc_auc"
    return doc


def run(tmp_path: Path, doc: dict[str, Any], env: dict[str, str] | None = None) -> tuple[Any, Path]:
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet", env=env)
    return result, out


def one_process_score(train: Path, key: str, fit_id: str, folds: int, bag_set: int, fold: int) -> float:
    """The same configuration trained in one process on the same rows (the same hashed fold)."""
    data = prepare_sharded(open_dataset(str(train)), "label", "auto", "roc_auc", None, Alone())
    assert data.shard is not None
    train_idx, val_idx = rows.split(data.shard.keys, folds, bag_set, fold)
    ctx = FitContext(
        fit_id=fit_id, hyperparameters=dict(SMALL), seed=bag_set, threads=1, device="cpu",
        problem=data.label.problem_type, n_classes=data.n_classes, metric=data.metric,
        feature_names=data.pre.feature_names, cardinalities=data.pre.cardinalities,
    )  # fmt: skip
    trained = family(key).fit(ctx, data.x.take(train_idx), data.y[train_idx], data.x.take(val_idx), data.y[val_idx])
    assert trained is not None
    pred = trained.model.predict(data.x.take(val_idx))
    return score(data.metric, data.label.problem_type, data.y[val_idx], pred, data.n_classes)


def test_gbm_and_xgb_train_on_shards_across_three_ranks(tmp_path: Path, tables: dict[str, Path]) -> None:
    doc = sharded_job(tmp_path, str(tables["train"]), {"GBM": [THREE], "XGB": [THREE]})
    doc["spec"]["data"]["test"] = str(tables["test"])
    result, out = run(tmp_path, doc)
    assert result.returncode == 0, result.stderr[-3000:]
    board = {r["model"]: r for r in leaderboard(out)}
    assert {"GBM", "XGB", "WeightedEnsemble"} <= set(board) and all(r["state"] == "Succeeded" for r in board.values())
    assert all(board[m]["score_test"] is not None for m in ("GBM", "XGB"))
    about = json.loads((out / "preprocessing.json").read_text())["data"]
    assert about["reading"] == "sharded" and len(about["rankRows"]) == 3 and sum(about["rankRows"]) == about["rows"]

    # Each rank read only the row groups the assignment gives it, and together every row once.
    dataset = open_dataset(str(tables["train"]))
    shares = assign([dataset.piece_rows(p) or 0 for p in dataset.pieces()], 3)
    log = (out / "trainer.log").read_text()
    for rank in range(3):
        # Only pieces in the list: the ranks share one stderr, and another rank's line can land mid-line.
        pattern = rf"rank {rank} read (\d+) of (\d+) rows: pieces \(file/row group\) ([\d/, ]+?) in [\d.]+ s"
        line = re.search(pattern, log)
        assert line is not None, log[-2000:]
        expected = [f"{dataset.pieces()[i].file}/{dataset.pieces()[i].row_group}" for i in shares[rank]]
        assert line.group(3).split(", ") == expected and int(line.group(1)) == about["rankRows"][rank]
        assert re.search(rf"rank {rank} peak memory: process [\d.]+ MiB", log)

    # Every rank of every fit stopped on the same round; the out-of-fold predictions cover every row once.
    recs = records(out)
    fits = [r for r in recs.values() if r.key in ("GBM", "XGB")]
    assert len(fits) == 6
    for rec in fits:
        assert len(set(rec.extra["rankIterations"])) == 1 and rec.extra["rankIterations"][0] == rec.best_iteration
        assert [sum(r) for r in rec.extra["rankRows"]] == about["rankRows"]
    for model in ("GBM", "XGB"):
        covered = np.load(out / "oof" / f"{model}.rows.npy")
        np.testing.assert_array_equal(covered, np.arange(about["rows"]))

    # Quality: each fold within 0.5% (relative) of the same configuration in one process on the same rows.
    for rec in fits:
        assert rec.fold is not None and rec.score_val is not None
        alone = one_process_score(tables["train"], rec.key, rec.id, 3, rec.bag_set, rec.fold)
        assert abs(rec.score_val - alone) <= 0.005 * abs(alone), (rec.id, rec.score_val, alone)


def test_fits_over_three_ranks_stop_together_at_their_share_of_the_time(
    tmp_path: Path, tables: dict[str, Path]
) -> None:
    """Trees that would train a million rounds: every rank stops on the same round once any rank's clock has passed
    the fit's deadline. Before, fits over several ranks took no deadline and ran on past the job's time limit."""
    endless = {"num_boost_round": 1_000_000, "early_stopping_rounds": 0, "learning_rate": 1e-6}
    config = {**THREE, "hyperparameters": endless}
    doc = sharded_job(tmp_path, str(tables["train"]), {"GBM": [config], "XGB": [config]}, bagging={"folds": 2})
    doc["spec"]["timeLimitSeconds"] = 20
    result, out = run(tmp_path, doc)
    assert result.returncode == 0, result.stderr[-3000:]
    fits = [r for r in records(out).values() if r.key in ("GBM", "XGB")]
    assert len(fits) == 4 and all(r.state == "Succeeded" for r in fits), [(r.id, r.state, r.message) for r in fits]
    for rec in fits:
        # The same round on every rank, far short of a million, ended by the time and saying so.
        assert len(set(rec.extra["rankIterations"])) == 1, (rec.id, rec.extra["rankIterations"])
        assert rec.fit_time is not None and rec.fit_time < 15, (rec.id, rec.fit_time)
        assert "stopped by" in str(rec.note), (rec.id, rec.note)
    rows = {r["model"]: r for r in leaderboard(out)}
    assert rows["GBM"]["state"] == "Succeeded" and rows["XGB"]["state"] == "Succeeded", rows


def test_a_pod_that_cannot_hold_its_share_is_refused_before_a_row_is_read(
    tmp_path: Path, tables: dict[str, Path]
) -> None:
    doc = sharded_job(
        tmp_path, str(tables["train"]), {"GBM": [THREE]}, resources={"cpus": 3, "cpusPerPod": 1, "memory": "300Mi"}
    )
    result, out = run(tmp_path, doc)
    assert result.returncode != 0
    error = json.loads((out / "error.json").read_text())
    assert error["reason"] == "OutOfMemory"
    assert "needs about" in error["error"] and "above its memory limit of 100 MiB" in error["error"]
    assert "raise spec.resources.memory to at least" in error["error"]
    assert not (out / "fits").exists() or not any((out / "fits").iterdir())
    assert "read" not in re.findall(r"rank \d (read) \d+ of", (out / "trainer.log").read_text())


def test_a_table_too_coarse_to_split_is_read_whole_and_says_so(tmp_path: Path) -> None:
    single = write_dataset(mixed_frame(1500, seed=13), tmp_path / "one", files=1, row_group_rows=10_000)
    result, out = run(tmp_path, sharded_job(tmp_path, str(single), {"GBM": [THREE]}))
    assert result.returncode == 0, result.stderr[-3000:]
    about = json.loads((out / "preprocessing.json").read_text())["data"]
    assert about["reading"].startswith("whole: the table is 1 row group(s) in all its files, too coarse to split")
    assert "rankRows" not in about
    assert leaderboard(out)[0]["state"] == "Succeeded"


def test_a_sharded_job_reads_its_shards_straight_from_a_bucket(
    tmp_path: Path, s3_bucket: str, tables: dict[str, Path]
) -> None:
    import os

    import pyarrow.fs as pafs

    from tabjob_trainer.storage.filesystems import filesystem

    fs, root = filesystem(f"s3://{s3_bucket}/train/")
    pafs.copy_files(str(tables["train"]), root, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    doc = sharded_job(tmp_path, f"s3://{s3_bucket}/train/", {"GBM": [THREE]})
    result, out = run(tmp_path, doc, env=dict(os.environ))
    assert result.returncode == 0, result.stderr[-3000:]
    about = json.loads((out / "preprocessing.json").read_text())["data"]
    assert about["reading"] == "sharded" and sum(about["rankRows"]) == about["rows"]


def test_networks_train_ddp_on_shards(tmp_path: Path, tables: dict[str, Path]) -> None:
    nn = {"num_epochs": 5, "patience": 3, "hidden_size": 32}
    tabm = {"num_epochs": 3, "patience": 3, "k": 4, "d_block": 32, "n_blocks": 1}
    models = {
        "NN_TORCH": [{"processes": 3, "resources": {"cpus": 3}, "hyperparameters": nn}],
        "TABM": [{"processes": 3, "resources": {"cpus": 3}, "hyperparameters": tabm}],
    }
    result, out = run(tmp_path, sharded_job(tmp_path, str(tables["train"]), models))
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "preprocessing.json").read_text())["data"]["reading"] == "sharded"
    fits = [r for r in records(out).values() if r.key in ("NN_TORCH", "TABM")]
    assert len(fits) == 6 and all(r.state == "Succeeded" for r in fits)
    for rec in fits:  # every rank ends on the leader's best epoch
        assert len(set(rec.extra["rankIterations"])) == 1 and rec.extra["rankIterations"][0] == rec.best_iteration
        assert rec.score_val is not None and rec.score_val > 0.7
