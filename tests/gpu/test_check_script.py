"""`make gpu-check`'s parts that need no GPU: the refusal where none is visible, the wheel folder, and the
offline install from it (in a network namespace where one can be made, so nothing could come from PyPI)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / ".gpu-wheels"
LIMIT = 64 * 1024 * 1024
needs_wheels = pytest.mark.skipif(not WHEELS.is_dir(), reason="no .gpu-wheels here: `make gpu-wheels` fills it")


def _check(env: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    results = tmp / "results"
    base = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "OUT")}
    return subprocess.run(
        ["bash", str(ROOT / "hack/gpu/check.sh")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**base, "TABJOB_GPU_RESULTS": str(results), "GPU_PYTHON": sys.executable, **env},
    )


def test_hidden_gpus_are_refused_at_once_with_the_reason(tmp_path: Path) -> None:
    result = _check({"CUDA_VISIBLE_DEVICES": ""}, tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gpu-check: no CUDA device is visible: CUDA_VISIBLE_DEVICES='' hides every GPU")
    assert "nothing was installed or run" in lines[0]
    assert not (tmp_path / "results").exists()


def test_an_unknown_benchmark_is_refused_before_anything_runs(tmp_path: Path) -> None:
    # gpu_render is a module of bench/ but not a benchmark
    result = _check({"GPU_BENCHES": "gpu_tabm gpu_render"}, tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "gpu-check: unknown benchmark 'gpu_render' in GPU_BENCHES; "
        "they are: gpu_tabm gpu_lightgbm gpu_torch gpu_packing"
    )
    assert not (tmp_path / "results").exists()


def test_a_machine_without_nvidia_driver_is_refused_with_the_reason(tmp_path: Path) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("nvidia-smi is installed here: the no-driver refusal cannot be seen")
    result = _check({}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "gpu-check: no CUDA device is visible: nvidia-smi is not on PATH (no NVIDIA driver). Run it on a machine "
        "with an NVIDIA GPU and its driver; nothing was installed or run."
    )


@needs_wheels
def test_wheel_folder_fits_the_limit_and_holds_what_a_gpu_box_lacks_but_never_torch() -> None:
    files = [p for p in WHEELS.iterdir() if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= LIMIT
    names = [p.name for p in files]
    assert any(n.startswith("lightgbm-") and n.endswith(".tar.gz") for n in names)  # compiled there, with CUDA
    for needed in ("pydantic-", "pydantic_core-", "pytest-", "scikit_build_core-", "setuptools-", "wheel-"):
        assert any(n.startswith(needed) for n in names), needed
    assert not [n for n in names if n.split("-")[0] in ("torch", "numpy", "pandas", "pyarrow", "nvidia_nccl_cu13")]


@needs_wheels
@pytest.mark.slow
def test_install_from_the_wheel_folder_works_offline(tmp_path: Path) -> None:
    """install.sh into a scratch target with this Python; tabjob then imports from there, torch from where it was."""
    import torch

    command = ["bash", str(ROOT / "hack/gpu/install.sh"), str(tmp_path)]
    isolated = (
        shutil.which("unshare") is not None and subprocess.run(["unshare", "-n", "true"], check=False).returncode == 0
    )
    if isolated:
        command = ["unshare", "-n", *command]  # no network at all: only the folder can satisfy pip
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "GPU_PYTHON": sys.executable},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    site = tmp_path / "site"
    assert not list(site.glob("torch*"))
    probe = "import tabjob, tabjob_trainer, pydantic, torch; print(tabjob.__file__, pydantic.__file__, torch.__file__)"
    shown = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # not the checkout, whose tree would shadow the installed package
        env={**os.environ, "PYTHONPATH": str(site)},
    ).stdout.split()
    assert shown[0].startswith(str(site)) and shown[1].startswith(str(site))
    assert shown[2] == torch.__file__
