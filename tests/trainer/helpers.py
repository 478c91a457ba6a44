"""Small tables and manifests for the trainer tests, plus a way to run a job exactly as `tabjob run` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tabjob.api import load_manifest
from tabjob.api.manifest_yaml import dump_yaml
from tabjob.contracts.results import FitEvent, read_events
from tabjob.planner import plan_job
from tabjob_trainer.preprocess import Encoded
from tabjob_trainer.record import FitRecord


def numeric_table(rows: int, cols: int = 16, seed: int = 0) -> tuple[Encoded, np.ndarray, Encoded, np.ndarray]:
    """Encoded numeric columns and a binary label from the first four and an interaction, split 80/20: the table
    the GPU tests compare devices on."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, cols)).astype(np.float32)
    logit = x[:, :4] @ np.array([1.5, -1.0, 0.8, 0.5]) + 0.7 * x[:, 0] * x[:, 1]
    y = (logit + rng.logistic(size=rows) > 0).astype(np.float64)
    cut = int(rows * 0.8)
    empty = np.zeros((rows, 0), dtype=np.int64)
    return Encoded(x[:cut], empty[:cut]), y[:cut], Encoded(x[cut:], empty[cut:]), y[cut:]


def mixed_table(n: int, seed: int = 0, colours: tuple[str, ...] = ("red", "green", "blue")) -> pd.DataFrame:
    """Numeric, categorical and missing values; a string binary label that depends on all of them."""
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=n)
    x2 = rng.normal(size=n)
    colour = rng.choice(list(colours), size=n)
    logit = 1.5 * x1 - x2 + np.where(colour == colours[0], 1.0, -0.5)
    label = np.where(logit + rng.normal(scale=0.5, size=n) > 0, "yes", "no")
    x2[rng.random(n) < 0.1] = np.nan
    df = pd.DataFrame({"x1": x1, "x2": x2, "colour": colour, "label": label})
    df.loc[rng.random(n) < 0.05, "colour"] = None
    return df


def manifest(train: str, label: str, models: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "data": {"train": train, "label": label},
        "output": {"path": "/output/test"},
        "resources": {"cpus": 2},
        "models": models,
        "ensemble": {"size": 10},
    }
    for key, value in spec.items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return {"apiVersion": "tabjob.dev/v1alpha1", "kind": "TabularJob", "metadata": {"name": "t"}, "spec": body}


def write_manifest(tmp: Path, doc: dict[str, Any]) -> Path:
    path = tmp / "job.yaml"
    path.write_text(dump_yaml(doc))
    return path


def tabjob(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process, as a user runs it."""
    code = "import sys; from tabjob.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def plan_of(path: Path) -> Any:
    return plan_job(load_manifest(path))


def records(out: Path) -> dict[str, FitRecord]:
    return {p.parent.name: FitRecord.model_validate_json(p.read_bytes()) for p in (out / "fits").glob("*/result.json")}


def leaderboard(out: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((out / "leaderboard.json").read_text())
    return rows


def events(out: Path) -> list[FitEvent]:
    return read_events(out)
