"""Two NN_TORCH fits of `gpus: 0.5` packed onto one GPU against the same two fits one after the other.

A 2-fold bagged NN_TORCH through `tabjob run`, budget one GPU and 16 CPUs, 8 CPUs per fit either way: with
`gpus: 0.5` per fit the planner runs both folds at once on the one GPU (two threads of one rank); with `gpus: 1`
they run one after the other. Training time is from the first fit's start to the last fit's end; the ratio is
sequential / packed (above 1: packing wins). A small MLP, as tabular MLPs are, which leaves a GPU mostly idle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import events, job, records, synthetic, tabjob_run
from bench.gpu_common import cpu_threads, output_dir, require_gpu, save

ROWS, COLS, EPOCHS = 100_000, 30, 5
HP: dict[str, Any] = {"num_epochs": EPOCHS, "patience": EPOCHS, "batch_size": 512, "hidden_size": 256}
WORK = Path("/tmp/tabjob-bench/gpu_packing")


def _variant(
    data: Path, work: Path, name: str, hp: dict[str, Any], per_fit: dict[str, Any], budget: dict[str, Any]
) -> dict[str, Any]:
    models = {"NN_TORCH": [{"resources": per_fit, "hyperparameters": hp}]}
    doc = job(str(data), models, resources=budget, bagging={"folds": 2})
    wall, out = tabjob_run(doc, work, name)
    marks = events(out)
    starts = [e.t for e in marks if e.event == "FitStarted"]
    ends = [e.t for e in marks if e.event == "FitEnded" and e.state == "Succeeded"]
    recs = records(out)
    return {
        "wall_seconds": wall,
        "training_seconds": max(ends) - min(starts),
        "sum_fit_seconds": sum(r.fit_time for r in recs),
        "devices": sorted({r.device for r in recs}),
        "score_val": [r.score_val for r in recs],
    }


def run(
    rows: int = ROWS, cols: int = COLS, hp: dict[str, Any] = HP, gpu: bool = True, work: Path = WORK
) -> dict[str, Any]:
    """On the GPU: 0.5 vs 1 GPU per fit. Without one (gpu=False) the same shapes on CPU slots, for the code path."""
    work.mkdir(parents=True, exist_ok=True)
    data = work / f"train-{rows}x{cols}.parquet"
    if not data.exists():
        synthetic(rows, cols, seed=6).to_parquet(data)
    cpus = max(1, cpu_threads() // 2)
    result: dict[str, Any] = {"rows": rows, "cols": cols, "folds": 2, "cpus_per_fit": cpus, "hyperparameters": hp}
    if gpu:
        two = {"cpus": 2 * cpus, "gpus": 1}
        result["packed"] = _variant(data, work, "packed", hp, {"cpus": cpus, "gpus": 0.5}, two)
        result["sequential"] = _variant(data, work, "sequential", hp, {"cpus": cpus, "gpus": 1}, two)
    else:  # one slot's CPUs or two in the budget: the folds run side by side or one after the other
        result["packed"] = _variant(data, work, "packed", hp, {"cpus": cpus}, {"cpus": 2 * cpus})
        result["sequential"] = _variant(data, work, "sequential", hp, {"cpus": cpus}, {"cpus": cpus})
    result["speedup_packed_vs_sequential"] = (
        result["sequential"]["training_seconds"] / result["packed"]["training_seconds"]
    )
    return result


def main(argv: list[str] | None = None) -> None:
    out = output_dir(argv, __doc__ or "")
    require_gpu("gpu_packing")
    save(out, "gpu_packing", run())


if __name__ == "__main__":
    main()
