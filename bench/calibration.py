"""The machine a benchmark ran on, in figures that compare across machines: the CPU's model name and the seconds a
fixed LightGBM fit takes on it. Results measured on different machines (a faster one gives a time-bound run more
work in the same seconds) are only comparable once those figures say how far apart the machines were."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np

ROWS, COLUMNS, ROUNDS = 100_000, 20, 300


def cpu_model() -> str:
    info = Path("/proc/cpuinfo")
    for line in info.read_text().splitlines() if info.exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def calibration_seconds() -> float:
    """A fixed regression fit (100,000 x 20, 300 rounds, 2 threads, the data seeded): the best of three, so that a
    passing burst of other work on the machine counts less."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, COLUMNS))
    y = x[:, 0] * x[:, 1] + np.sin(x[:, 2] * 3) + rng.normal(scale=0.1, size=ROWS)
    params = {"objective": "regression", "num_threads": 2, "verbosity": -1, "deterministic": True, "seed": 0}
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        lgb.train(params, lgb.Dataset(x, y), num_boost_round=ROUNDS)
        best = min(best, time.perf_counter() - start)
    return round(best, 3)


def machine() -> dict[str, Any]:
    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "calibration_seconds": calibration_seconds()}


if __name__ == "__main__":
    print(machine())
