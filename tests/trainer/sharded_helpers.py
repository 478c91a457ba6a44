"""Ranks as threads for the sharded reader's tests: the same Exchange a torchrun job's process group gives, without
processes (the torchrun tests run the real thing)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

T = TypeVar("T")


class ThreadGroup:
    """``world`` ranks in threads exchanging Python objects through shared slots and a barrier."""

    def __init__(self, world: int) -> None:
        self.world = world
        self.slots: list[Any] = [None] * world
        self.barrier = threading.Barrier(world, timeout=120)

    def member(self, rank: int) -> Member:
        return Member(self, rank)

    def run(self, fn: Callable[[Member], T]) -> list[T]:
        results: list[Any] = [None] * self.world
        errors: list[BaseException | None] = [None] * self.world

        def one(rank: int) -> None:
            try:
                results[rank] = fn(self.member(rank))
            except BaseException as exc:
                errors[rank] = exc

        threads = [threading.Thread(target=one, args=(r,)) for r in range(self.world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for e in errors:
            if e is not None:
                raise e
        return results


class Member:
    def __init__(self, group: ThreadGroup, rank: int) -> None:
        self.group, self.rank, self.world = group, rank, group.world

    def all_gather(self, value: Any) -> list[Any]:
        self.group.barrier.wait()
        self.group.slots[self.rank] = value
        self.group.barrier.wait()
        out = list(self.group.slots)
        self.group.barrier.wait()
        return out

    def gather(self, value: Any) -> list[Any] | None:
        everyone = self.all_gather(value)
        return everyone if self.rank == 0 else None


def mixed_frame(n: int, seed: int = 0) -> pd.DataFrame:
    """Numeric with gaps, an integer column, strings with gaps, a boolean with gaps, and a string label."""
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=n)
    x2 = rng.normal(size=n)
    x2[rng.random(n) < 0.1] = np.nan
    colour = rng.choice(["red", "green", "blue", "teal"], size=n).astype(object)
    colour[rng.random(n) < 0.05] = None
    flag = rng.random(n) < 0.5
    flagged = pd.array(flag, dtype="boolean")
    flagged[rng.random(n) < 0.05] = pd.NA
    count = rng.integers(0, 50, size=n)
    logit = 1.5 * x1 - np.nan_to_num(x2) + np.where(colour == "red", 1.0, -0.5) + 0.5 * flag
    label = np.where(logit + rng.normal(scale=0.5, size=n) > 0, "yes", "no").astype(object)
    label[rng.random(n) < 0.02] = None  # rows without a label are dropped, wherever they are
    return pd.DataFrame({"x1": x1, "x2": x2, "colour": colour, "flag": flagged, "count": count, "label": label})


def write_dataset(frame: pd.DataFrame, root: Path, files: int, row_group_rows: int) -> Path:
    """``frame`` as ``files`` Parquet files with row groups of ``row_group_rows`` rows."""
    root.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(np.array_split(np.arange(len(frame)), files)):
        table = pa.Table.from_pandas(frame.iloc[part], preserve_index=False)
        pq.write_table(table, root / f"part-{i:05d}.parquet", row_group_size=row_group_rows)
    return root
