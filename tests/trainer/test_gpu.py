"""GPU paths. The CUDA ones need a GPU and are skipped, with the reason, where torch sees none (`make gpu-check`
runs them on a GPU box); the onGpuUnavailable ones hide CUDA themselves and run everywhere.

Tolerances are stated where a GPU result is compared with the CPU's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tabjob_trainer.errors import GPUUnavailableError
from tabjob_trainer.metrics import score
from tabjob_trainer.models import gbm, mlp, network
from tabjob_trainer.models.base import FitContext
from tests.trainer.helpers import (
    events,
    leaderboard,
    manifest,
    mixed_table,
    numeric_table,
    plan_of,
    records,
    tabjob,
    write_manifest,
)

ROOT = Path(__file__).resolve().parents[2]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; torch sees none here")
HIDDEN = {"CUDA_VISIBLE_DEVICES": ""}
SMALL_GBM = {"num_boost_round": 20}
SMALL_NN = {"num_epochs": 2}


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


def _env_with_repo() -> dict[str, str]:
    """Child processes import hack.gpu.* from the checkout and tabjob from wherever this process found it."""
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


# --- everywhere: no GPU visible -------------------------------------------------------------------------------


def test_lightgbm_gpu_choice_is_never_silent() -> None:
    cuda_ok = gbm._probe("cuda", 0) is None
    opencl_ok = gbm._probe("gpu", 0) is None
    if cuda_ok or opencl_ok:
        params, device, note = gbm.choose_device(_ctx("cuda:0"))
        assert params["device_type"] in ("cuda", "gpu") and note is None and device.endswith(":0")
        return
    with pytest.raises(GPUUnavailableError, match="FallbackToCPU"):
        gbm.choose_device(_ctx("cuda:0"))
    params, device, note = gbm.choose_device(_ctx("cuda:0", fallback=True))
    assert params == {"device_type": "cpu"} and device == "cpu"
    assert note is not None and note.startswith("FallbackToCPU: LightGBM cannot use the GPU here")


@pytest.mark.parametrize(
    ("returncode", "stderr", "reason"),
    [
        # a CUDA build with no device visible: LightGBM ends the probe's process instead of raising
        (
            -6,
            "[LightGBM] [Fatal] [CUDA] no CUDA-capable device is detected /tmp/b/src/io/cuda/cuda_column_data.cpp 20\n"
            "\nterminate called after throwing an instance of 'std::runtime_error'\n",
            "[CUDA] no CUDA-capable device is detected (the probe was killed by signal 6)",
        ),
        # a build without the learner: LightGBMError, which the probe turns into its exit message
        (1, "CUDA Tree Learner was not enabled in this build.\n", "CUDA Tree Learner was not enabled in this build."),
        (1, "", "no message"),
    ],
)
def test_a_failed_lightgbm_device_probe_names_lightgbms_reason(returncode: int, stderr: str, reason: str) -> None:
    assert gbm.probe_failure(returncode, stderr) == reason


def test_validation_is_scored_in_training_sized_batches() -> None:
    """The validation fold goes through the network `batch` rows at a time, so a batch halved after running out
    of GPU memory also bounds the evaluation's memory (a whole fold at once ran out on a GPU capped at 2 GiB)."""
    train, y_train, val, y_val = numeric_table(3_000)
    hp: dict[str, Any] = {"num_epochs": 2, "batch_size": 128, "hidden_size": 32, "num_layers": 2}
    trained = mlp.fit(_ctx("cpu", **hp), train, y_train, val, y_val)
    assert trained is not None
    model = trained.model
    assert isinstance(model, network.NetworkModel)
    seen: list[int] = []
    hook = model.net.register_forward_hook(lambda _m, args, _out: seen.append(len(args[0])))
    num, cat = model._inputs(val)
    target = torch.from_numpy(y_val.astype(np.float32)).unsqueeze(1)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    scored = network._evaluate(model, num, cat, target, y_val, loss_fn, _ctx("cpu"), 128)
    assert scored is not None
    score_, _ = scored
    hook.remove()
    assert max(seen) == 128 and sum(seen) == len(y_val) == 600
    assert 0.5 < score_ <= 1


@pytest.mark.slow
def test_cuda_hidden_fail_refuses_and_fallback_trains_on_cpu_and_says_so(tmp_path: Path) -> None:
    """`tabjob run` with CUDA_VISIBLE_DEVICES="": Fail is one line naming the way out; FallbackToCPU trains each
    GPU fit on the CPU and records why on the leaderboard. Runs on a GPU box too, where CUDA is really there."""
    mixed_table(600, seed=3).to_csv(tmp_path / "train.csv", index=False)
    models = {"GBM": [{"hyperparameters": SMALL_GBM}], "NN_TORCH": [{"hyperparameters": SMALL_NN}]}
    doc = manifest(str(tmp_path / "train.csv"), "label", models, resources={"cpus": 2, "gpus": 1})
    refused = tmp_path / "fail"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(refused), "--quiet", env=HIDDEN)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "needs 1 GPU" in result.stderr and "0 visible" in result.stderr and "FallbackToCPU" in result.stderr
    assert not (refused / "fits").exists()  # refused before any fit started

    doc["spec"]["onGpuUnavailable"] = "FallbackToCPU"
    out = tmp_path / "fallback"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet", env=HIDDEN)
    assert result.returncode == 0, result.stderr
    rows = {r["model"]: r for r in leaderboard(out)}
    for model in ("GBM", "NN_TORCH"):
        assert rows[model]["state"] == "Succeeded" and rows[model]["device"] == "cpu", rows[model]
        assert rows[model]["note"].startswith("FallbackToCPU"), rows[model]


@pytest.mark.slow
def test_cuda_hidden_in_a_pod_fails_each_gpu_fit_with_the_reason(tmp_path: Path) -> None:
    """The trainer entry as a pod runs it (no CLI in front): with Fail and no CUDA, every GPU fit fails with
    GPUUnavailableError naming FallbackToCPU, nothing trains on the CPU, and the job exits non-zero."""
    mixed_table(600, seed=4).to_csv(tmp_path / "train.csv", index=False)
    models = {"GBM": [{"hyperparameters": SMALL_GBM}], "NN_TORCH": [{"hyperparameters": SMALL_NN}]}
    doc = manifest(str(tmp_path / "train.csv"), "label", models, resources={"cpus": 2, "gpus": 1}, ensemble={"size": 0})
    spec = write_manifest(tmp_path, doc)
    out = tmp_path / "run"
    out.mkdir()
    (out / "plan.json").write_text(plan_of(spec).to_json())
    trainer = [sys.executable, "-m", "tabjob_trainer", "--spec", str(spec), "--plan", str(out / "plan.json")]
    result = subprocess.run(
        [*trainer, "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **HIDDEN},
    )
    assert result.returncode == 1, result.stderr
    recs = {r.model: r for r in records(out).values()}
    assert set(recs) == {"GBM", "NN_TORCH"}
    for rec in recs.values():
        assert rec.state == "Failed" and rec.error_class == "GPUUnavailableError", rec
        assert rec.message and "FallbackToCPU" in rec.message, rec


# --- on a GPU ----------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_cuda
def test_lightgbm_cuda_trains_and_scores_like_the_cpu_fit() -> None:
    """Same data, parameters and seed on device_type=cuda and cpu. LightGBM's CUDA learner builds histograms in
    single precision and may break split ties differently, so the fits are close, not equal. Tolerance: validation
    accuracy within 0.015, mean absolute difference of predicted probabilities at most 0.03, and their
    correlation at least 0.98: about twice the gap between two CPU fits that differ only in their feature-sampling
    seed (0.015 and 0.998 on this table)."""
    if gbm._probe("cuda", 0) is not None:
        pytest.skip(f"this LightGBM has no CUDA learner ({gbm._probe('cuda', 0)}); make gpu-check compiles one")
    train, y_train, val, y_val = numeric_table(40_000)
    # Same number of rounds on both devices.
    hp: dict[str, Any] = {"num_boost_round": 200, "early_stopping_rounds": 1000}
    on_gpu = gbm.fit(_ctx("cuda:0", **hp), train, y_train, val, y_val)
    on_cpu = gbm.fit(_ctx("cpu", **hp), train, y_train, val, y_val)
    assert on_gpu is not None and on_cpu is not None
    assert on_gpu.device == "cuda:0" and on_gpu.note is None and on_cpu.device == "cpu"
    p_gpu, p_cpu = on_gpu.model.predict(val), on_cpu.model.predict(val)
    acc_gpu = score("accuracy", "binary", y_val, p_gpu, 2)
    acc_cpu = score("accuracy", "binary", y_val, p_cpu, 2)
    assert acc_cpu > 0.72  # the table has signal: a broken fit cannot pass by matching another broken fit
    assert abs(acc_gpu - acc_cpu) <= 0.015, (acc_gpu, acc_cpu)
    assert float(np.mean(np.abs(p_gpu - p_cpu))) <= 0.03
    assert float(np.corrcoef(p_gpu, p_cpu)[0, 1]) >= 0.98


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
    recs = {r.model: r for r in records(out).values()}
    assert recs["NN_TORCH"].device == "cuda:0"
    assert recs["NN_TORCH"].extra["amp"] == ("bfloat16" if torch.cuda.is_bf16_supported() else "float16")
    # LightGBM's pip wheels may lack CUDA and OpenCL: then the fallback is recorded, never silent.
    assert recs["GBM"].device in ("cuda:0", "gpu:0") or recs["GBM"].fallback
    assert all(r["state"] == "Succeeded" for r in leaderboard(out))


@pytest.mark.gpu
@needs_cuda
def test_amp_is_on_by_default_on_cuda_and_off_when_asked() -> None:
    """AMP (bf16 where the GPU has it, else fp16 with a grad scaler) against full fp32: both learn the table;
    their validation accuracies within 0.03 of each other. (Speed is a benchmark: bench/gpu_torch.py.)"""
    train, y_train, val, y_val = numeric_table(20_000)
    hp: dict[str, Any] = {"num_epochs": 4, "patience": 4, "batch_size": 512}
    amp = mlp.fit(_ctx("cuda:0", **hp), train, y_train, val, y_val)
    fp32 = mlp.fit(_ctx("cuda:0", amp=False, **hp), train, y_train, val, y_val)
    assert amp is not None and fp32 is not None
    assert amp.device == fp32.device == "cuda:0"
    assert amp.extra["amp"] == ("bfloat16" if torch.cuda.is_bf16_supported() else "float16")
    assert fp32.extra["amp"] == "off"
    acc_amp = score("accuracy", "binary", y_val, amp.model.predict(val), 2)
    acc_fp32 = score("accuracy", "binary", y_val, fp32.model.predict(val), 2)
    assert acc_fp32 > 0.72 and abs(acc_amp - acc_fp32) <= 0.03, (acc_amp, acc_fp32)


@pytest.mark.gpu
@needs_cuda
def test_cuda_out_of_memory_halves_the_batch_and_finishes() -> None:
    """A 2 GiB cap on this process's CUDA allocations, and a batch whose activations need far more (262,144 rows
    through two 4,096-wide layers): the first attempts run out of memory, the fit halves its batch until one fits,
    and finishes with a model that has learned."""
    cap = 2 * 1024**3
    rows, batch = 300_000, 262_144
    train, y_train, val, y_val = numeric_table(rows, seed=1)
    hp: dict[str, Any] = {"num_epochs": 3, "patience": 3, "batch_size": batch, "hidden_size": 4096, "num_layers": 2}
    torch.cuda.set_device(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(0)
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(cap / total, 0)
    try:
        trained = mlp.fit(_ctx("cuda:0", **hp), train, y_train, val, y_val)
        peak = torch.cuda.max_memory_reserved(0)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, 0)
        torch.cuda.empty_cache()
    assert trained is not None and trained.device == "cuda:0"
    halved = trained.extra["batch_size"]
    assert halved < batch and batch % halved == 0 and halved >= 8, halved
    assert peak <= cap
    assert score("accuracy", "binary", y_val, trained.model.predict(val), 2) > 0.6


def _sample_gpu_memory(stop: threading.Event, seen: list[tuple[int, int]]) -> None:
    """(used, total) MiB of torch's cuda:0 as nvidia-smi reports it, every 0.2 s until stopped."""
    query = ["nvidia-smi", "--id=0", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"]
    uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)  # cuda:0 need not be nvidia-smi's GPU 0
    by_uuid = [query[0], f"--id=GPU-{uuid}", *query[2:]]
    if uuid is not None and subprocess.run(by_uuid, capture_output=True, check=False).returncode == 0:
        query = by_uuid
    while not stop.wait(0.2):
        line = subprocess.run(query, capture_output=True, text=True, check=False).stdout.strip()
        if line:
            used, total = (int(v) for v in line.split(","))
            seen.append((used, total))


@pytest.mark.gpu
@needs_cuda
@pytest.mark.slow
def test_two_half_gpu_fits_share_one_gpu(tmp_path: Path) -> None:
    """Two NN_TORCH folds of `gpus: 0.5` in a budget of one GPU: the plan packs them onto one rank's GPU; both
    train on cuda:0 at the same time, both finish without shrinking their batch, and the GPU's memory in use
    (nvidia-smi, sampled through the run) stays within the device."""
    mixed_table(20_000, seed=7).to_csv(tmp_path / "train.csv", index=False)
    hp = {"num_epochs": 6, "patience": 6, "batch_size": 256, "hidden_size": 512}
    models = {"NN_TORCH": [{"resources": {"cpus": 2, "gpus": 0.5}, "hyperparameters": hp}]}
    doc = manifest(str(tmp_path / "train.csv"), "label", models, resources={"cpus": 4, "gpus": 1}, bagging={"folds": 2})
    plan = plan_of(write_manifest(tmp_path, doc))
    assert [p.gpus for p in plan.pods] == [1] and plan.concurrency.folds == 2
    assert {(f.gpus, f.rank, f.device) for f in plan.fits} == {(0.5, 0, "cuda:0")}

    seen: list[tuple[int, int]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_gpu_memory, args=(stop, seen), daemon=True)
    sampler.start()
    out = tmp_path / "run"
    try:
        result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    finally:
        stop.set()
        sampler.join()
    assert result.returncode == 0, result.stderr
    recs = list(records(out).values())
    assert len(recs) == 2
    for rec in recs:
        assert rec.state == "Succeeded" and rec.device == "cuda:0", rec
        assert rec.extra["batch_size"] == hp["batch_size"], rec  # no out-of-memory halving
    spans: dict[str | None, dict[str, float]] = {}
    for e in events(out):
        if e.event in ("FitStarted", "FitEnded"):
            spans.setdefault(e.fit, {})[e.event] = e.t
    (a, b) = spans.values()
    assert a["FitStarted"] < b["FitEnded"] and b["FitStarted"] < a["FitEnded"], spans  # they overlapped
    assert seen, "nvidia-smi reported no memory figures during the run"
    assert max(used for used, _ in seen) < seen[0][1]


def _torchrun(nproc: int, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    return subprocess.run(
        [*launcher, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env={**os.environ, **_env_with_repo(), **(env or {})},
    )


@pytest.mark.gpu
@needs_cuda
@pytest.mark.slow
def test_trainer_under_torchrun_world_size_1_trains_on_the_gpu(tmp_path: Path) -> None:
    """A one-GPU pod's command: torchrun with one rank around the trainer entry; the rank maps to cuda:0."""
    mixed_table(2000, seed=8).to_csv(tmp_path / "train.csv", index=False)
    models = {"NN_TORCH": [{"hyperparameters": {"num_epochs": 3}}]}
    doc = manifest(str(tmp_path / "train.csv"), "label", models, resources={"cpus": 2, "gpus": 1}, ensemble={"size": 0})
    spec = write_manifest(tmp_path, doc)
    out = tmp_path / "run"
    out.mkdir()
    (out / "plan.json").write_text(plan_of(spec).to_json())
    trainer = ["-m", "tabjob_trainer", "--spec", str(spec), "--plan", str(out / "plan.json"), "--output", str(out)]
    result = _torchrun(1, *trainer)
    assert result.returncode == 0, result.stderr[-3000:]
    (rec,) = records(out).values()
    assert rec.state == "Succeeded" and rec.device == "cuda:0" and rec.ranks == [0], rec


@pytest.mark.gpu
@needs_cuda
@pytest.mark.slow
def test_nccl_ddp_at_world_size_1_through_torchrun(tmp_path: Path) -> None:
    """The NCCL operations a DDP fit uses (hack/gpu/nccl_probe.py) with the one rank one GPU allows."""
    out = tmp_path / "probe.json"
    result = _torchrun(1, "-m", "hack.gpu.nccl_probe", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    probe = json.loads(out.read_text())
    assert probe["world"] == 1 and probe["backend"] == "nccl" and probe["device"] == "cuda:0"
    assert probe["params_equal_after_steps"] and probe["stop_decision_broadcast"]


@pytest.mark.gpu
@needs_cuda
@pytest.mark.slow
def test_nccl_two_ranks_sharing_one_gpu(tmp_path: Path) -> None:
    """Two ranks on the same GPU. NCCL has refused this ("Duplicate GPU detected") since 2.5: a communicator needs
    one device per rank. Then the test skips saying so, which is why the planner gives each rank its own whole GPU
    and packs fractional fits as threads of one rank instead. Should NCCL allow it, the ranks must agree."""
    out = tmp_path / "probe.json"
    result = _torchrun(2, "-m", "hack.gpu.nccl_probe", str(out), "--share-gpu", env={"NCCL_DEBUG": "WARN"})
    if result.returncode != 0:
        text = result.stdout + result.stderr
        refusal = [line.strip() for line in text.splitlines() if "Duplicate GPU" in line]
        assert refusal, text[-3000:]  # any other failure is a real one
        pytest.skip(f"NCCL refuses two ranks on one GPU: {refusal[0][:200]}")
    probe = json.loads(out.read_text())
    assert probe["world"] == 2 and probe["params_equal_after_steps"] and probe["stop_decision_broadcast"]


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL DDP over two GPUs needs 2 CUDA GPUs; fewer are visible")
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
    assert rec.device == "cuda:0" and rec.ranks == [0, 1] and rec.extra["world"] == 2
