"""Shared helpers for the trainer benchmarks: synthetic tables, manifests, timed `tabjob run`s.

Every figure is a ratio against a baseline measured in the same run on the same machine, so the absolute speed
of the machine (and of whatever else runs on it) mostly cancels out.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.envelope import envelope, write
from bench.sections import RESULTS as RESULTS
from bench.sections import ROOT as ROOT
from tabjob.api.manifest_yaml import dump_yaml
from tabjob.contracts.results import FitEvent, read_events
from tabjob_trainer.record import FitRecord


def synthetic(rows: int, cols: int, seed: int = 0) -> pd.DataFrame:
    """A binary problem with signal in a third of the columns and some interactions."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, cols)).astype(np.float32)
    k = max(cols // 3, 1)
    logit = x[:, :k] @ rng.normal(size=k) + 0.5 * x[:, 0] * x[:, 1]
    y = (logit + rng.logistic(size=rows) > 0).astype(np.int64)
    df = pd.DataFrame(x, columns=[f"f{i}" for i in range(cols)])
    df["label"] = y
    return df


def synthetic_parquet(rows: int, cols: int) -> Path:
    """The shared 500k x 30 benchmark table, written once to /tmp/tabjob-bench/overhead and reused."""
    work = Path("/tmp/tabjob-bench/overhead")
    work.mkdir(parents=True, exist_ok=True)
    data = work / "train.parquet"
    if not data.exists():
        synthetic(rows, cols).to_parquet(data)
    return data


def job(train: str, models: dict[str, Any], label: str = "label", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "data": {"train": train, "label": label},
        "output": {"path": "/output/bench"},
        "resources": {"cpus": 2},
        "models": models,
        "ensemble": {"size": 0},
    }
    body.update(spec)
    return {"apiVersion": "tabjob.dev/v1alpha1", "kind": "TabularJob", "metadata": {"name": "bench"}, "spec": body}


def tabjob_run(doc: dict[str, Any], work: Path, name: str) -> tuple[float, Path]:
    """Wall seconds of `tabjob run` end to end (a fresh output directory), and the output directory."""
    work.mkdir(parents=True, exist_ok=True)
    manifest = work / f"{name}.yaml"
    manifest.write_text(dump_yaml(doc))
    out = work / f"{name}.out"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    code = "import sys; from tabjob.cli import main; sys.exit(main(sys.argv[1:]))"
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, "run", str(manifest), "--output-dir", str(out), "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"tabjob run {name} failed: {proc.stderr[-2000:]}")
    return wall, out


def records(out: Path) -> list[FitRecord]:
    return [FitRecord.model_validate_json(p.read_bytes()) for p in sorted((out / "fits").glob("*/result.json"))]


def events(out: Path) -> list[FitEvent]:
    return read_events(out)


def save(name: str, result: dict[str, Any], echo: bool = True) -> None:
    write(name, envelope(name, result), echo)
