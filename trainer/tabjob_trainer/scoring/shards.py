"""Pure: a dataset's pieces -> shards, and which pod scores which shard. No I/O, so every pod computes the same.

A shard is a contiguous run of pieces (a Parquet file's row groups, or whole CSV files) in the dataset's order, so
the part files, read in name order, hold the rows in the order `tabjob predict` reads them. Shards are balanced by
rows (by bytes for CSV files, whose rows are unknown unread): shard k ends at the first piece where the running total
reaches k/n of the whole, so no shard exceeds an even share by more than its largest piece. Pods take shards
round-robin (pod i scores shards i, i+n, ...), so a pod's shards spread over the dataset and each pod gets an
almost equal share of a dataset whose rows are sorted by anything.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

SHARDS_PER_POD = 4  # a retried pod redoes at most a quarter of its share; more shards, more part files
MAX_SHARD_ROWS = 1_000_000  # a shard is read and scored in memory: bound what one holds


class ShardPiece(BaseModel):
    """A piece with what balancing and reporting need: its rows (None for CSV) and its weight (rows, else bytes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    file: int = Field(ge=0)
    row_group: int | None = Field(default=None, ge=0)
    rows: int | None = Field(default=None, ge=0)
    weight: int = Field(ge=0)


class Shard(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0)
    pieces: list[ShardPiece]

    @property
    def rows(self) -> int | None:
        counts = [p.rows for p in self.pieces]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)

    @property
    def weight(self) -> int:
        return sum(p.weight for p in self.pieces)


def shard_count(pieces: int, parallelism: int, rows: int | None) -> int:
    """How many shards: SHARDS_PER_POD per pod, more when a shard would exceed MAX_SHARD_ROWS, never more than
    there are pieces (a piece is never split), at least one."""
    wanted = max(1, parallelism) * SHARDS_PER_POD
    if rows:
        wanted = max(wanted, math.ceil(rows / MAX_SHARD_ROWS))
    return max(1, min(pieces, wanted))


def split(pieces: Sequence[ShardPiece], count: int) -> list[Shard]:
    """`pieces` in order as `count` contiguous, non-empty shards balanced by weight (count <= len(pieces))."""
    if not pieces:
        return []
    count = max(1, min(count, len(pieces)))
    total = sum(p.weight for p in pieces)
    cuts: list[int] = []  # index of the first piece of shards 1..count-1
    running, start = 0, 0
    for i, piece in enumerate(pieces):
        k = len(cuts) + 1  # the shard whose end we are looking for
        if k >= count:
            break
        running += piece.weight
        left_pieces = len(pieces) - (i + 1)
        left_shards = count - k
        # End shard k here once it holds its share, or when the rest need every remaining piece; never empty.
        if i + 1 > start and (running * count >= k * total or left_pieces <= left_shards):
            cuts.append(i + 1)
            start = i + 1
    bounds = [0, *cuts, len(pieces)]
    return [Shard(index=k, pieces=list(pieces[bounds[k] : bounds[k + 1]])) for k in range(len(bounds) - 1)]


def assigned(shards: int, parallelism: int, pod: int) -> list[int]:
    """The shards pod `pod` of `parallelism` scores: round-robin."""
    return list(range(pod, shards, max(1, parallelism)))


def fingerprint(*parts: object) -> str:
    """A short stable hash of JSON-able values: what a plan is made from, so a resume checks it is the same."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
