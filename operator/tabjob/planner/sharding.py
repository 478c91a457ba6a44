"""Sharded reading: which ranks read which part of the training table, decided purely (docs/sharding.md).

A job reads *sharded* when every fit of its plan trains data-parallel over all of its ranks with a family that can
train on shards (``families.ModelFamily.shards``): each rank then reads only its share of the table's pieces
(Parquet row groups, or whole CSV files), balanced by rows, and never the rest. Otherwise every rank reads the whole
table, and the plan says why: a fit on fewer ranks needs every row where it runs, a family that cannot shard reads
whole, the stack layer trains on rank 0 over every row, and a table with fewer pieces than ranks is too
coarse to split.

The planner, ``tabjob validate`` and the trainer call the same functions, so what the plan says is what runs: the
trainer assigns the pieces itself from the dataset's footers, the same way on every rank.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from tabjob.contracts.plan import FitPlan, ReadingPlan, RefitPlan, StackPlan
from tabjob.families import family


@dataclass(frozen=True)
class DataStats:
    """What is known of the training table before a row is read: its files' footers (or sizes, for CSV)."""

    format: str  # "parquet" or "csv"
    columns: int  # every column, the label and partition columns included
    pieces: tuple[int, ...]  # the weight of each piece in dataset order: its rows (Parquet), its bytes (CSV)
    rows: int | None  # None for CSV
    stored_bytes: int  # the files' sizes
    uncompressed_bytes: int | None  # the Parquet footers' sum of uncompressed sizes; None for CSV


def assign(weights: Sequence[int], ranks: int) -> list[list[int]]:
    """Piece indices for each of ``ranks`` ranks, balanced by weight (pure, deterministic).

    The heaviest piece first goes to the least loaded rank (ties: the lower piece index first, the lower rank),
    which keeps the largest load within the heaviest piece of the smallest; each rank's pieces in dataset order, so
    it reads its rows in the table's order. A piece of weight 0 (an empty row group) goes nowhere.
    """
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, not {ranks}")
    loads = [(0, r) for r in range(ranks)]
    out: list[list[int]] = [[] for _ in range(ranks)]
    for index in sorted((i for i, w in enumerate(weights) if w > 0), key=lambda i: (-weights[i], i)):
        load, rank = heapq.heappop(loads)
        out[rank].append(index)
        heapq.heappush(loads, (load + weights[index], rank))
    return [sorted(pieces) for pieces in out]


def splittable(stats: DataStats, world: int) -> str:
    """Why the table cannot be split over ``world`` ranks, or "" when it can."""
    pieces = sum(1 for w in stats.pieces if w > 0)
    if pieces >= world:
        return ""
    unit = "row group(s) in all its files" if stats.format == "parquet" else "file(s)"
    return (
        f"the table is {pieces} {unit}, too coarse to split over {world} ranks (write it as at least {world} files "
        "or row groups to shard it)"
    )


def reading_plan(
    fits: Sequence[FitPlan],
    world: int,
    stacking: StackPlan | None,
    stats: DataStats | None = None,
    refit: RefitPlan | None = None,
) -> ReadingPlan:
    """Sharded when every fit spans every rank with a family that can shard and the table splits; else whole, and
    why (pure)."""
    if world == 1:
        return ReadingPlan(mode="whole", reason="one rank reads the table")
    everyone = list(range(world))
    for f in fits:
        if sorted(f.ranks) != everyone:
            return ReadingPlan(
                mode="whole",
                reason=f"{f.model} trains in {f.processes} process(es), not over all {world} ranks: each rank it "
                "runs on needs every row, so every rank reads the whole table",
            )
    for f in fits:
        kind = family(f.key)
        if not kind.shards:
            return ReadingPlan(
                mode="whole",
                reason=f"{f.model} ({kind.library}) cannot train on shards: every rank reads the whole table",
            )
    if stacking is not None:
        return ReadingPlan(
            mode="whole",
            reason="the stack layer trains on rank 0 over every row: every rank reads the whole table (turn stacking "
            "off to shard it)",
        )
    if refit is not None:
        return ReadingPlan(
            mode="whole",
            reason="the refit on every row (refitFull) trains on rank 0 over every row: every rank reads the whole "
            "table (set refitFull: false to shard it)",
        )
    if stats is not None and (why := splittable(stats, world)):
        return ReadingPlan(mode="whole", reason=f"{why}; every rank reads it whole")
    return ReadingPlan(mode="sharded")
