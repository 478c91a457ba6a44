"""The GPU benchmarks' CPU halves at a tiny size, so the scripts cannot rot before the first GPU run; and the
GPU section of BENCHMARKS.md, which must be exactly what the recorded results render to (no invented figures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import gpu_lightgbm, gpu_packing, gpu_render, gpu_tabm, gpu_torch
from bench.common import RESULTS, ROOT
from bench.gpu_common import save

TINY_NN = {"num_epochs": 2, "patience": 2, "batch_size": 128, "hidden_size": 16, "num_layers": 2}
TINY_TABM = {"num_epochs": 2, "patience": 2, "batch_size": 128, "k": 4, "d_block": 16, "n_blocks": 1, "n_bins": 8}


@pytest.fixture(scope="module")
def cpu_halves(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    work = tmp_path_factory.mktemp("gpu-bench")
    return {
        "gpu_lightgbm": gpu_lightgbm.run(rows=3000, cols=6, rounds=5, repeats=1, gpu=False),
        "gpu_torch": gpu_torch.run(rows=1500, cols=6, hp=TINY_NN, gpu=False, work=work / "torch"),
        "gpu_tabm": gpu_tabm.run(rows=1500, cols=6, hp=TINY_TABM, gpu=False, work=work / "tabm"),
        "gpu_packing": gpu_packing.run(rows=1500, cols=6, hp=TINY_NN, gpu=False, work=work / "packing"),
    }


@pytest.mark.slow
def test_cpu_halves_run_and_measure(cpu_halves: dict[str, dict[str, Any]]) -> None:
    lgb = cpu_halves["gpu_lightgbm"]
    assert lgb["cpu"]["seconds"] > 0 and 0.5 < lgb["cpu"]["auc_holdout"] <= 1.0 and "cuda" not in lgb
    nn = cpu_halves["gpu_torch"]["cpu"]
    assert nn["device"] == "cpu" and nn["amp"] == "off" and nn["epochs"] == 2 and nn["samples_per_second"] > 0
    tabm = cpu_halves["gpu_tabm"]
    assert tabm["family"] == "TABM" and tabm["cpu"]["device"] == "cpu" and tabm["cpu"]["epochs"] == 2
    # the network as the fit trained it: the bench's settings over TabM's defaults
    assert tabm["cpu"]["network"] == {"arch_type": "tabm-mini", "k": 4, "n_blocks": 1, "d_block": 16, "n_bins": 8}
    packing = cpu_halves["gpu_packing"]
    assert packing["packed"]["devices"] == packing["sequential"]["devices"] == ["cpu"]
    assert packing["speedup_packed_vs_sequential"] > 0


@pytest.mark.slow
def test_renderer_shows_each_figure_and_the_machine(cpu_halves: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    # Only the layout is under test here: the GPU variants are filled with the CPU figures measured above.
    lgb = {**cpu_halves["gpu_lightgbm"]}
    lgb["cuda"], lgb["speedup_cuda_vs_cpu"] = lgb["cpu"], 1.0
    nn = {**cpu_halves["gpu_torch"]}
    nn["gpu_amp"] = nn["gpu_fp32"] = nn["cpu"]
    nn["speedup_gpu_vs_cpu"] = nn["speedup_amp_vs_fp32"] = 1.0
    tabm = {**cpu_halves["gpu_tabm"]}
    tabm["gpu_amp"] = tabm["gpu_fp32"] = tabm["cpu"]
    tabm["speedup_gpu_vs_cpu"], tabm["speedup_amp_vs_fp32"] = 2.0, 1.25
    # The packing ratio is measured and may round to 1.00 by chance; pin it so each figure is found by its value.
    packing = {**cpu_halves["gpu_packing"], "speedup_packed_vs_sequential": 1.5}
    for name, result in (("gpu_lightgbm", lgb), ("gpu_torch", nn), ("gpu_tabm", tabm), ("gpu_packing", packing)):
        save(tmp_path, name, result)
    text = gpu_render.render(tmp_path)
    assert "Waiting for a GPU machine" not in text
    machine = json.loads((tmp_path / "gpu_torch.json").read_text())["machine"]
    assert f"driver {machine['driver']}" in text and "LightGBM CUDA vs CPU" in text
    assert text.count("**1.00x**") == 3 and "AMP vs fp32 **1.00x**" in text
    assert "Speed-up of packing **1.50x**" in text
    assert "**TABM: GPU vs CPU, AMP vs fp32** (`bench/gpu_tabm.py`)" in text
    assert "tabm-mini, k = 4, 1 blocks of 16, 8 bins" in text and "GPU vs CPU **2.00x**; AMP vs fp32 **1.25x**" in text


def test_without_results_the_section_says_it_waits_for_a_gpu(tmp_path: Path) -> None:
    text = gpu_render.render(tmp_path)
    assert "Waiting for a GPU machine" in text and "make gpu-check" in text
    assert "x**" not in text  # no ratio is shown


def test_benchmarks_md_gpu_section_is_what_the_recorded_results_render_to() -> None:
    document = (ROOT / "BENCHMARKS.md").read_text()
    assert gpu_render.replace_section(document, gpu_render.render(RESULTS)) == document


def test_a_benchmark_that_died_is_recorded_and_shown_as_failed(tmp_path: Path) -> None:
    gpu_render.main(["--failed", "gpu_lightgbm", "--exit-code", "139", "--results", str(tmp_path)])
    record = json.loads((tmp_path / "gpu_lightgbm.json").read_text())
    assert record["benchmark"] == "gpu_lightgbm" and record["failed"] == "exit 139 (SIGSEGV)"
    text = gpu_render.render(tmp_path)
    assert "**`bench/gpu_lightgbm.py` failed**" in text and "exit 139 (SIGSEGV)" in text
    assert "| CUDA (`device_type=cuda`)" not in text  # no figure for a benchmark that wrote none
    assert "Not measured yet: `bench/gpu_torch.py`, `bench/gpu_tabm.py`, `bench/gpu_packing.py`" in text
