"""The trainer's own entry on a GPU, as a pod starts it (torchrun with one rank around `python -m tabjob_trainer`):
LightGBM's CUDA learner and TabM on CUDA, each asked for with `gpus: 1` and onGpuUnavailable Fail, so a fit that
cannot use the GPU fails instead of training on the CPU. Skipped, with the reason, where torch sees no GPU.

`make gpu-check` preloads a LightGBM build that crashes when numpy loads before it (README.md, "GPU check"); these
runs take that preload away, so they prove what a pod has: the entry preloading the library itself (preload.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tabjob_trainer.metrics import score
from tabjob_trainer.models.registry import family
from tests.trainer.helpers import leaderboard, manifest, mixed_table, numeric_table, plan_of, records, write_manifest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; torch sees none here"),
]
SMALL_TABM = {"num_epochs": 6, "patience": 6, "k": 8}


def _pod_command(tmp_path: Path, models: dict[str, Any], rows: int = 3000) -> subprocess.CompletedProcess[str]:
    """A one-GPU pod's command on a job of `models`, with no LD_PRELOAD; its output folder is tmp_path/run."""
    mixed_table(rows, seed=11).to_csv(tmp_path / "train.csv", index=False)
    doc = manifest(str(tmp_path / "train.csv"), "label", models, resources={"cpus": 4, "gpus": 1})
    spec = write_manifest(tmp_path, doc)
    out = tmp_path / "run"
    out.mkdir()
    (out / "plan.json").write_text(plan_of(spec).to_json())
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1"]
    trainer = ["-m", "tabjob_trainer", "--spec", str(spec), "--plan", str(out / "plan.json"), "--output", str(out)]
    return subprocess.run(
        [*launcher, *trainer], capture_output=True, text=True, timeout=600, check=False, cwd=ROOT, env=env
    )


@pytest.mark.slow
def test_lightgbm_cuda_and_tabm_train_on_the_gpu_through_the_pods_entry(tmp_path: Path) -> None:
    from tabjob_trainer.models import gbm

    reason = gbm._probe("cuda", 0)
    if reason is not None:
        pytest.skip(f"this LightGBM has no CUDA learner ({reason}); make gpu-check compiles one")
    gpu = {"cpus": 2, "gpus": 1}
    models = {
        "GBM": [{"resources": gpu, "hyperparameters": {"num_boost_round": 60}}],
        "TABM": [{"resources": gpu, "hyperparameters": SMALL_TABM}],
    }
    result = _pod_command(tmp_path, models)
    # torchrun's own report of a dead rank is about 2,000 characters: room before it for the rank's last words
    assert result.returncode == 0, result.stderr[-8000:]
    recs = {r.model: r for r in records(tmp_path / "run").values()}
    assert set(recs) == {"GBM", "TABM"}
    for rec in recs.values():
        assert rec.state == "Succeeded" and rec.device == "cuda:0" and not rec.fallback, rec
        assert not (rec.note or "").startswith("FallbackToCPU"), rec
    assert recs["TABM"].extra["amp"] == ("bfloat16" if torch.cuda.is_bf16_supported() else "float16")
    rows = {r["model"]: r for r in leaderboard(tmp_path / "run")}
    assert rows["GBM"]["device"] == rows["TABM"]["device"] == "cuda:0"
    # the table has signal (mixed_table's label follows its columns): both learnt it on the GPU
    assert all(rows[m]["score_val"] > 0.7 for m in ("GBM", "TABM")), rows


def test_tabm_on_cuda_with_amp_scores_like_its_cpu_fit() -> None:
    """Same table, settings and seed on cuda:0 (AMP, TabM's default there) and the CPU (fp32). The two devices draw
    different dropout and shuffles from their generators and AMP rounds in bfloat16, so the fits are close, not
    equal. Tolerance: validation accuracy within 0.03 (about three standard errors on 4,000 rows) and both above
    0.72, so a broken fit cannot pass by matching another."""
    from tabjob_trainer.models.base import FitContext

    train, y_train, val, y_val = numeric_table(20_000, cols=12)

    def fit(device: str) -> float:
        ctx = FitContext(
            fit_id=f"tabm-{device}",
            hyperparameters={**SMALL_TABM, "batch_size": 512},
            seed=0,
            threads=4,
            device=device,
            problem="binary",
            n_classes=2,
            metric="accuracy",
            feature_names=[f"f{i}" for i in range(12)],
            cardinalities=[],
        )
        trained = family("TABM").fit(ctx, train, y_train, val, y_val)
        assert trained is not None and trained.device == device
        if device != "cpu":
            assert trained.extra["amp"] in ("bfloat16", "float16")
        return score("accuracy", "binary", y_val, trained.model.predict(val), 2)

    on_gpu, on_cpu = fit("cuda:0"), fit("cpu")
    assert on_cpu > 0.72 and on_gpu > 0.72 and abs(on_gpu - on_cpu) <= 0.03, (on_gpu, on_cpu)
