"""What a rank knows of its shard beside its rows (kept apart so that ``dataset.Prepared`` can hold it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ShardInfo:
    rank: int  # this rank's place among the job's ranks
    world: int
    keys: np.ndarray  # uint64 identity of each of this rank's rows: its folds (sharded/rows.py)
    rows: np.ndarray  # each row's index in the whole table (rows with a label, in dataset order)
    total_rows: int
    pieces: list[tuple[int, int | None]] = field(default_factory=list)  # (file, row group) this rank read
    test_rows: np.ndarray | None = None
    total_test_rows: int = 0
    identity: str = ""  # the data's fingerprint, the same on every rank
    y_all: np.ndarray | None = None  # rank 0: every row's label, by index in the whole table
    y_test_all: np.ndarray | None = None
