"""Serving a finished run: in-process predict before and after loading once, and (``--served``) the same rows over
the Open Inference Protocol through `tabjob serve` (real MLServer), against a peer that serves the run's best single
LightGBM booster with ``mlserver-lightgbm``.

The table is Palmer penguins (the CSV shipped in the ``palmerpenguins`` package): strings, missing cells, three
classes. The run has the quickstart's shape (GBM + NN_TORCH, 3 folds, weighted ensemble). Batches of 1,000 rows are
drawn with replacement from the test rows with a fixed seed. Variants alternate within each repeat and the best
repeat counts, so other work on this shared machine mostly cancels out; the load average is recorded.

    nice -n 5 python -m bench.serving [--served]
    python -m bench.render_serving   # the BENCHMARKS.md section
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.common import job, save, tabjob_run
from tabjob_trainer.predictor import Predictor

WORK = Path("/tmp/tabjob-bench/serving")
LABEL = "species"
BATCH = 1000


def penguins() -> pd.DataFrame:
    from importlib.resources import files

    with (files("palmerpenguins") / "data" / "penguins.csv").open() as fh:
        return pd.read_csv(fh)


def prepare() -> tuple[Path, pd.DataFrame, pd.DataFrame]:
    """The trained run (trained once, reused), the labelled test rows and a batch of BATCH rows without labels."""
    df = penguins()
    test = df[df.isna().any(axis=1) | (df.index % 4 == 0)]
    train = df.drop(test.index)
    WORK.mkdir(parents=True, exist_ok=True)
    train.to_csv(WORK / "train.csv", index=False)
    run = WORK / "penguins.out"
    if not (run / "leaderboard.json").exists():
        doc = job(
            str(WORK / "train.csv"),
            {"GBM": [{"hyperparameters": {}}], "NN_TORCH": [{"hyperparameters": {}}]},
            label=LABEL,
            bagging={"folds": 3},
            ensemble={"size": 25},
        )
        doc["metadata"]["name"] = "penguins"
        seconds, run = tabjob_run(doc, WORK, "penguins")
        print(f"trained {run} in {seconds:.1f} s")
    rng = np.random.default_rng(0)
    batch = test.drop(columns=[LABEL]).iloc[rng.integers(0, len(test), BATCH)].reset_index(drop=True)
    return run, test.reset_index(drop=True), batch


def best_seconds(fn: Callable[[], Any], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def in_process(run: Path, batch: pd.DataFrame, rounds: int = 5) -> dict[str, Any]:
    """Seconds per call: loading every fit from disk on each call (as `Predictor` did) against loading once."""
    loaded = Predictor.load(run)
    one = batch.iloc[:1]
    cases: dict[str, Callable[[], Any]] = {
        "before_batch": lambda: Predictor.load(run).predict_frame(batch, "bench"),
        "after_batch": lambda: loaded.predict_frame(batch, "bench"),
        "before_row": lambda: Predictor.load(run).predict_frame(one, "bench"),
        "after_row": lambda: loaded.predict_frame(one, "bench"),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):  # alternate the variants so both see the same machine load
        for name, fn in cases.items():
            times[name] += best_seconds(fn, 10)
    result: dict[str, Any] = {"model": loaded.model, "fits": len(loaded.fits), "batch": BATCH}
    for name, ts in times.items():
        result[name] = {"best_s": min(ts), "median_s": statistics.median(ts)}
    # Best of the repeats, as the other benchmarks here: the least disturbed call of each variant.
    result["speedup_batch"] = result["before_batch"]["best_s"] / result["after_batch"]["best_s"]
    result["speedup_row"] = result["before_row"]["best_s"] / result["after_row"]["best_s"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--served", action="store_true", help="also serve over HTTP (MLServer) and the peer")
    args = parser.parse_args()
    run, test, batch = prepare()
    result: dict[str, Any] = {"table": "palmerpenguins", "test_rows": len(test), "in_process": in_process(run, batch)}
    if args.served:
        from bench.serving_http import served

        result["served"] = served(run, test, batch, LABEL)
    save("serving", result)


if __name__ == "__main__":
    main()
