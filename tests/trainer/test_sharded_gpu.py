"""XGB data-parallel on GPUs: one GPU per rank, XGBoost's collective over NCCL, each rank on its own shard. Needs two
CUDA GPUs (NCCL refuses two ranks on one device); skipped, saying so, where fewer are visible."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.trainer.helpers import leaderboard, manifest, records, tabjob, write_manifest
from tests.trainer.sharded_helpers import mixed_frame, write_dataset

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="XGB over NCCL needs 2 CUDA GPUs (one per rank); fewer are visible"
)
def test_xgb_trains_on_shards_with_one_gpu_per_rank(tmp_path: Path) -> None:
    train = write_dataset(mixed_frame(6000, seed=21), tmp_path / "train", files=4, row_group_rows=500)
    two = {"processes": 2, "resources": {"cpus": 2, "gpus": 2}, "hyperparameters": {"num_boost_round": 60}}
    doc = manifest(str(train), "label", {"XGB": [two]}, resources={"cpus": 2, "gpus": 2}, bagging={"folds": 2})
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "preprocessing.json").read_text())["data"]["reading"] == "sharded"
    fits = list(records(out).values())
    assert len(fits) == 2 and all(r.device == "cuda:0" and not r.fallback for r in fits)
    assert all(len(set(r.extra["rankIterations"])) == 1 for r in fits)
    assert leaderboard(out)[0]["state"] == "Succeeded"
