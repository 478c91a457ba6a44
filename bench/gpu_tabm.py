"""TABM (TabM) on the GPU against the CPU (16 threads), and AMP against full fp32 on the GPU, through `tabjob run`.

The same three variants as bench/gpu_torch.py, run by its code, with TabM's default network (tabm-mini, k = 32
members, 2 blocks of 256, piecewise-linear embeddings over 48 bins) on a 50,000 x 40 table: each row passes
through all 32 members, so a TabM epoch costs far more than an MLP's, and a smaller table keeps the CPU variant
to about a minute. A fixed number of epochs (patience = epochs) and a fixed batch, so every variant does the same
work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import gpu_torch
from bench.gpu_common import output_dir, require_gpu, save

ROWS, COLS, EPOCHS = 50_000, 40, 3
HP: dict[str, Any] = {"num_epochs": EPOCHS, "patience": EPOCHS, "batch_size": 512}
WORK = Path("/tmp/tabjob-bench/gpu_tabm")


def run(
    rows: int = ROWS, cols: int = COLS, hp: dict[str, Any] = HP, gpu: bool = True, work: Path = WORK
) -> dict[str, Any]:
    return gpu_torch.run(rows=rows, cols=cols, hp=hp, gpu=gpu, work=work, family="TABM")


def main(argv: list[str] | None = None) -> None:
    out = output_dir(argv, __doc__ or "")
    require_gpu("gpu_tabm")
    save(out, "gpu_tabm", run())


if __name__ == "__main__":
    main()
