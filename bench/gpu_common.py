"""Shared by the GPU benchmarks (bench/gpu_*.py): the machine's GPU and driver, the results folder, the refusal
where no GPU is visible. Every GPU figure is a ratio of two variants measured in one run on one machine, and the
JSON names the GPU and driver they were measured on."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS

CPU_THREADS = 16  # the CPU side of each comparison: a 16-core GPU box's cores, or all of a smaller machine's


def cpu_threads() -> int:
    return max(1, min(CPU_THREADS, os.cpu_count() or 1))


def gpu_info() -> dict[str, Any]:
    """GPU 0 as nvidia-smi names it (name, driver, memory), plus the CUDA and library versions in use."""
    import lightgbm
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "lightgbm": lightgbm.__version__,
        "cpus": os.cpu_count(),
    }
    if os.environ.get("LD_PRELOAD"):
        # check.sh preloads a LightGBM build that crashes when numpy loads first; the record says so
        info["ld_preload"] = os.environ["LD_PRELOAD"]
    return {**info, **nvidia_smi()}


def nvidia_smi() -> dict[str, Any]:
    """GPU 0 as nvidia-smi names it; what a benchmark that died can still say of its machine (no torch, no
    LightGBM imported)."""
    query = "name,driver_version,memory.total,compute_cap"
    try:
        line = subprocess.run(
            ["nvidia-smi", "--id=0", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        name, driver, memory, capability = (v.strip() for v in line.split(","))
    except (OSError, subprocess.SubprocessError, ValueError):
        return {"gpu": None, "driver": None}
    return {"gpu": name, "driver": driver, "gpu_memory": memory, "compute_capability": capability}


def require_gpu(name: str) -> None:
    import torch

    if not torch.cuda.is_available():
        sys.exit(f"{name}: needs a CUDA GPU and torch sees none; run `make gpu-check` on a GPU machine")


def output_dir(argv: list[str] | None, doc: str) -> Path:
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--output", type=Path, default=RESULTS, help="folder for the JSON (default bench/results)")
    return Path(parser.parse_args(argv).output)


def save(out: Path, name: str, result: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": name, "when": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": gpu_info(), **result}
    path = out / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2))
    print(json.dumps(doc, indent=2))
    return path
