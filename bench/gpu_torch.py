"""NN_TORCH on the GPU against the CPU (16 threads), and AMP against full fp32 on the GPU, through `tabjob run`.

One MLP configuration on a 200,000 x 50 table, a fixed number of epochs (patience = epochs, so every variant
does the same work); samples/s = training rows x epochs / fit seconds (includes the per-epoch validation).
Variants: GPU with AMP (tabjob's default on CUDA: bf16 where the GPU has it), GPU with `amp: false`, CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import job, records, synthetic, tabjob_run
from bench.gpu_common import cpu_threads, output_dir, require_gpu, save

ROWS, COLS, EPOCHS = 200_000, 50, 4
HP: dict[str, Any] = {"num_epochs": EPOCHS, "patience": EPOCHS, "batch_size": 1024, "hidden_size": 512, "num_layers": 3}
WORK = Path("/tmp/tabjob-bench/gpu_torch")
# The settings that size each family's network, as the fit trained with them (its defaults merged in by the plan).
NETWORK = {"NN_TORCH": ("num_layers", "hidden_size"), "TABM": ("arch_type", "k", "n_blocks", "d_block", "n_bins")}


def _variant(
    data: Path, work: Path, name: str, family: str, hp: dict[str, Any], resources: dict[str, Any]
) -> dict[str, Any]:
    doc = job(str(data), {family: [{"hyperparameters": hp}]}, resources=resources)
    wall, out = tabjob_run(doc, work, name)
    (rec,) = records(out)
    epochs = len(rec.curve["val"])
    assert rec.rows_train is not None, rec
    return {
        "wall_seconds": wall,
        "fit_seconds": rec.fit_time,
        "samples_per_second": rec.rows_train * epochs / rec.fit_time,
        "epochs": epochs,
        "score_val": rec.score_val,
        "device": rec.device,
        "amp": rec.extra["amp"],
        "network": {key: rec.hyperparameters[key] for key in NETWORK[family]},
    }


def run(
    rows: int = ROWS,
    cols: int = COLS,
    hp: dict[str, Any] = HP,
    gpu: bool = True,
    work: Path = WORK,
    family: str = "NN_TORCH",
) -> dict[str, Any]:
    """The three variants of one network family (NN_TORCH here; bench/gpu_tabm.py runs TABM through it)."""
    work.mkdir(parents=True, exist_ok=True)
    data = work / f"train-{rows}x{cols}.parquet"
    if not data.exists():
        synthetic(rows, cols, seed=5).to_parquet(data)
    threads = cpu_threads()
    result: dict[str, Any] = {
        "family": family,
        "rows": rows,
        "cols": cols,
        "cpu_threads": threads,
        "hyperparameters": hp,
    }
    result["cpu"] = _variant(data, work, "cpu", family, hp, {"cpus": threads})
    if gpu:
        one_gpu = {"cpus": threads, "gpus": 1}
        result["gpu_amp"] = _variant(data, work, "gpu_amp", family, hp, one_gpu)
        result["gpu_fp32"] = _variant(data, work, "gpu_fp32", family, {**hp, "amp": False}, one_gpu)
        rate = {k: result[k]["samples_per_second"] for k in ("cpu", "gpu_amp", "gpu_fp32")}
        result["speedup_gpu_vs_cpu"] = rate["gpu_amp"] / rate["cpu"]
        result["speedup_amp_vs_fp32"] = rate["gpu_amp"] / rate["gpu_fp32"]
    return result


def main(argv: list[str] | None = None) -> None:
    out = output_dir(argv, __doc__ or "")
    require_gpu("gpu_torch")
    save(out, "gpu_torch", run())


if __name__ == "__main__":
    main()
