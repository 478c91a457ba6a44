"""CatBoost's and XGBoost's GPU paths. The choice of device is checked everywhere (no GPU here: a clear refusal, or
the CPU with the reason under FallbackToCPU); the CUDA fits need a GPU and are skipped, with the reason, where torch
sees none (`make gpu-check` runs them on a GPU box). Tolerances are stated where a GPU fit is compared with the CPU's.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from tabjob_trainer.errors import GPUUnavailableError
from tabjob_trainer.metrics import score
from tabjob_trainer.models.base import FitContext
from tests.trainer.helpers import leaderboard, manifest, mixed_table, numeric_table, records, tabjob, write_manifest

cat: ModuleType = pytest.importorskip("tabjob_trainer.models.cat", reason="CatBoost is not installed here")
xgb: ModuleType = pytest.importorskip("tabjob_trainer.models.xgb", reason="XGBoost is not installed here")

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; torch sees none here")


def _ctx(device: str, fallback: bool = False, **hyperparameters: Any) -> FitContext:
    return FitContext(
        fit_id="t0",
        hyperparameters=hyperparameters,
        seed=0,
        threads=4,
        device=device,
        problem="binary",
        n_classes=2,
        metric="accuracy",
        feature_names=[f"f{i}" for i in range(16)],
        cardinalities=[],
        fallback_to_cpu=fallback,
    )


# Rounds fixed and early stopping off, so both devices train the same number of trees.
SAME_ROUNDS: dict[ModuleType, dict[str, Any]] = {
    cat: {"iterations": 300, "early_stopping_rounds": 0},
    xgb: {"num_boost_round": 300, "early_stopping_rounds": 0},
}


def _gpu_works(module: ModuleType) -> bool:
    return module._gpu_failure(0) is None


@pytest.mark.parametrize("module", [cat, xgb], ids=["CAT", "XGB"])
def test_a_gpu_fit_never_falls_back_silently(module: ModuleType) -> None:
    if _gpu_works(module):
        params, device, note = module.choose_device(_ctx("cuda:0"))
        assert device == "cuda:0" and note is None, params
        return
    library = "CatBoost" if module is cat else "XGBoost"
    with pytest.raises(GPUUnavailableError, match=rf"{library} cannot use the GPU here .*FallbackToCPU"):
        module.choose_device(_ctx("cuda:0"))
    params, device, note = module.choose_device(_ctx("cuda:0", fallback=True))
    assert device == "cpu" and params in ({"task_type": "CPU"}, {"device": "cpu"})
    assert note is not None and note.startswith(f"FallbackToCPU: {library} cannot use the GPU here (")


def test_the_reasons_are_the_libraries_own_words_without_their_source_paths() -> None:
    assert cat.reason("catboost/cuda/cuda_lib/cuda_base.h:265: CUDA error 35: CUDA driver version is insufficient") == (
        "CUDA error 35: CUDA driver version is insufficient"
    )
    said = "[09:50:25] WARNING: /__w/xgboost/xgboost/src/context.cc:53: No visible GPU is found, setting device to CPU."
    assert xgb.reason(said) == "No visible GPU is found, setting device to CPU."


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("module", [cat, xgb], ids=["CAT", "XGB"])
def test_a_cuda_fit_trains_on_the_gpu_and_scores_like_the_cpu_fit(module: ModuleType) -> None:
    """Same data, parameters, rounds and seed on the GPU and the CPU. Both libraries build histograms differently
    on the GPU (CatBoost's GPU learner also bins borders differently), so the fits are close, not equal. Tolerance:
    validation accuracy within 0.02 and predicted probabilities correlated at least 0.95."""
    if not _gpu_works(module):
        pytest.fail(f"{module.__name__} cannot use the GPU that torch sees: {module._gpu_failure(0)}")
    train, y_train, val, y_val = numeric_table(40_000)
    on_gpu = module.fit(_ctx("cuda:0", **SAME_ROUNDS[module]), train, y_train, val, y_val)
    on_cpu = module.fit(_ctx("cpu", **SAME_ROUNDS[module]), train, y_train, val, y_val)
    assert on_gpu is not None and on_cpu is not None
    assert on_gpu.device == "cuda:0" and on_gpu.note is None and on_cpu.device == "cpu"
    p_gpu, p_cpu = on_gpu.model.predict(val), on_cpu.model.predict(val)
    acc_gpu = score("accuracy", "binary", y_val, p_gpu, 2)
    acc_cpu = score("accuracy", "binary", y_val, p_cpu, 2)
    assert acc_cpu > 0.72  # the table has signal: a broken fit cannot pass by matching another broken fit
    assert abs(acc_gpu - acc_cpu) <= 0.02, (acc_gpu, acc_cpu)
    assert float(np.corrcoef(p_gpu, p_cpu)[0, 1]) >= 0.95


@pytest.mark.gpu
@needs_cuda
@pytest.mark.slow
def test_a_job_packs_catboost_and_xgboost_onto_halves_of_one_gpu(tmp_path: Path) -> None:
    """The planner's fractional-GPU rule applies to the new families unchanged: CAT and XGB at 0.5 GPU each run
    side by side on GPU 0, and LightGBM at 0 GPUs stays on the CPU in the same job."""
    mixed_table(3000, seed=7).to_csv(tmp_path / "train.csv", index=False)
    half = {"cpus": 1, "gpus": 0.5}
    models = {
        "GBM": [{"resources": {"cpus": 1, "gpus": 0}, "hyperparameters": {"num_boost_round": 50}}],
        "CAT": [{"resources": half, "hyperparameters": {"iterations": 200}}],
        "XGB": [{"resources": half, "hyperparameters": {"num_boost_round": 200}}],
    }
    doc = manifest(str(tmp_path / "train.csv"), "label", models, resources={"cpus": 2, "gpus": 1})
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    recs = {r.model: r for r in records(out).values()}
    assert recs["CAT"].device == "cuda:0" and recs["XGB"].device == "cuda:0", recs
    assert recs["GBM"].device == "cpu"
    rows = {r["model"]: r for r in leaderboard(out)}
    assert all(r["state"] == "Succeeded" for r in rows.values()), rows
    assert rows["CAT"]["score_val"] > 0.7 and rows["XGB"]["score_val"] > 0.7
