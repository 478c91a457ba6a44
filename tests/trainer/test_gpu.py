"""GPU paths. The CUDA ones need a GPU and are skipped, with the reason, where torch sees none; the decision
logic around them (fallback recorded, or a clear error) is checked everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tabjob_trainer.errors import GPUUnavailableError
from tabjob_trainer.models import gbm
from tabjob_trainer.models.base import FitContext
from tests.trainer.helpers import leaderboard, manifest, mixed_table, records, tabjob, write_manifest

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; torch sees none here")


def _ctx(fallback: bool) -> FitContext:
    return FitContext(
        fit_id="GBM.t0",
        hyperparameters={},
        seed=0,
        threads=1,
        device="cuda:0",
        problem="binary",
        n_classes=2,
        metric="accuracy",
        feature_names=["a"],
        cardinalities=[],
        fallback_to_cpu=fallback,
    )


def test_lightgbm_gpu_choice_is_never_silent() -> None:
    cuda_ok = gbm._probe("cuda", 0) is None
    opencl_ok = gbm._probe("gpu", 0) is None
    if cuda_ok or opencl_ok:
        params, device, note = gbm.choose_device(_ctx(fallback=False))
        assert params["device_type"] in ("cuda", "gpu") and note is None and device.endswith(":0")
        return
    with pytest.raises(GPUUnavailableError, match="FallbackToCPU"):
        gbm.choose_device(_ctx(fallback=False))
    params, device, note = gbm.choose_device(_ctx(fallback=True))
    assert params == {"device_type": "cpu"} and device == "cpu"
    assert note is not None and note.startswith("FallbackToCPU: LightGBM cannot use the GPU here")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.slow
def test_gpu_job_mlp_on_cuda_with_amp_and_gbm_on_its_best_device(tmp_path: Path) -> None:
    mixed_table(2000, seed=5).to_csv(tmp_path / "train.csv", index=False)
    doc = manifest(
        str(tmp_path / "train.csv"),
        "label",
        {"GBM": [{"hyperparameters": {"num_boost_round": 50}}], "NN_TORCH": [{"hyperparameters": {"num_epochs": 5}}]},
        resources={"cpus": 2, "gpus": 1},
        onGpuUnavailable="FallbackToCPU",
    )
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    recs = {r["model"]: r for r in records(out).values()}
    assert recs["NN_TORCH"]["device"] == "cuda:0"
    # LightGBM's pip wheels may lack CUDA and OpenCL: then the fallback is recorded, never silent.
    assert recs["GBM"]["device"] in ("cuda:0", "gpu:0") or recs["GBM"]["note"].startswith("FallbackToCPU")
    assert all(r["state"] == "done" for r in leaderboard(out))


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL DDP needs 2 CUDA GPUs; fewer are visible")
def test_ddp_mlp_over_two_gpus_with_nccl(tmp_path: Path) -> None:
    mixed_table(2000, seed=6).to_csv(tmp_path / "train.csv", index=False)
    doc = manifest(
        str(tmp_path / "train.csv"),
        "label",
        {"NN_TORCH": [{"processes": 2, "resources": {"cpus": 2, "gpus": 2}, "hyperparameters": {"num_epochs": 5}}]},
        resources={"cpus": 2, "gpus": 2},
        ensemble={"size": 0},
    )
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    (rec,) = records(out).values()
    assert rec["device"] == "cuda:0" and rec["ranks"] == [0, 1] and rec["extra"]["world"] == 2
