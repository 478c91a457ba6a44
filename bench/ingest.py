"""Ingest: tabjob reading the training table against a bare pyarrow read of the same Parquet file.

Three timings of the 500k x 30 table, best of 3 each: ``pyarrow.parquet.read_table`` (the baseline);
tabjob's ``read_table`` (pyarrow read + conversion to pandas); and tabjob's whole ``prepare`` (read, label
checks, preprocessing into model-ready arrays). Goal: read_table at >= 0.8x the bare read's speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow.parquet as pq

from bench.common import save, synthetic_parquet
from tabjob_trainer.dataset import prepare, read_table

ROWS, COLS = 500_000, 30


def best_of(fns: dict[str, Callable[[], object]], rounds: int = 5) -> dict[str, float]:
    """Best time of each, taking turns round by round so load spikes and cache warmth hit all alike."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            started = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def main() -> None:
    data = synthetic_parquet(ROWS, COLS)
    work = data.parent
    csv = work / "train.csv"
    if not csv.exists():
        pq.read_table(data).to_pandas().to_csv(csv, index=False)
    import pyarrow.csv as pacsv

    t = best_of(
        {
            "bare": lambda: pq.read_table(str(data)),
            "bare_pandas": lambda: pq.read_table(str(data)).to_pandas(),
            "tabjob": lambda: read_table(str(data)),
            "prepare": lambda: prepare(str(data), "label", "auto", "auto"),
        }
    )
    bare, bare_pandas, tab, full = t["bare"], t["bare_pandas"], t["tabjob"], t["prepare"]
    c = best_of({"bare": lambda: pacsv.read_csv(str(csv)), "tabjob": lambda: read_table(str(csv))}, rounds=3)
    bare_csv, tab_csv = c["bare"], c["tabjob"]
    save(
        "ingest",
        {
            "rows": ROWS,
            "cols": COLS,
            "parquet": {
                "pyarrow_seconds": bare,
                "pyarrow_to_pandas_seconds": bare_pandas,
                "tabjob_read_seconds": tab,
                "tabjob_prepare_seconds": full,
                "speed_ratio_read": bare / tab,
                "speed_ratio_vs_pyarrow_to_pandas": bare_pandas / tab,
                "speed_ratio_prepare": bare / full,
            },
            "csv": {
                "pyarrow_seconds": bare_csv,
                "tabjob_read_seconds": tab_csv,
                "speed_ratio_read": bare_csv / tab_csv,
            },
        },
    )


if __name__ == "__main__":
    main()
