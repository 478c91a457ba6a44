"""Reading a table sharded: each rank its own pieces, the preprocessing agreed from the ranks' summaries.

Every rank opens the dataset (its footers: files, row groups, row counts) and takes the pieces ``assign`` gives it,
the same assignment on every rank. Then two passes over its own pieces, a window of them at a time, straight from
the source:

1. the label and the columns that may be categorical: how many rows have a label, the label's summary, each column's
   category counts and missing values. The ranks exchange these (``Exchange.all_gather``: summaries, never rows),
   and every rank derives the same columns, categories and label classes from the merged summaries.
2. every feature, encoded into arrays allocated once for the rank's rows (float32 numeric, int64 codes), each piece
   released as soon as it is encoded: a rank holds its share of the table once, as float32.

Each row keeps its key (``rows.row_keys``: file, row group, offset; its fold comes from it) and its index in the
whole table (rows with a label, in dataset order), which is how predictions are joined on rank 0. Rank 0 also
receives every row's label (a number per row), which the leaderboard scores against.

A failure on one rank (bad data, a store that refuses) is raised on every rank (``agreed``): no rank is left
waiting in a collective for one that gave up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from tabjob.planner.sharding import assign
from tabjob_trainer.errors import DataError
from tabjob_trainer.preprocess import Encoded, Preprocessor
from tabjob_trainer.problem import LabelInfo
from tabjob_trainer.sharded import summaries
from tabjob_trainer.sharded.encode import Layout, counts_of, encode_into, is_numeric_type, keys_of, kind_of
from tabjob_trainer.sharded.rows import row_keys
from tabjob_trainer.storage.datasets import read_pieces
from tabjob_trainer.storage.structure import Dataset, Piece, parallel

T = TypeVar("T")
# Pieces read at once (in parallel) before they are encoded and released: enough requests in flight to keep an
# object store's link busy, few enough that the Arrow pieces in hand stay a small constant beside the encoded rows.
WINDOW_BYTES = 64 * 2**20
WINDOW_PIECES = 4


class Exchange(Protocol):
    """The job's process group, as far as reading needs it."""

    rank: int
    world: int

    def all_gather(self, value: Any) -> list[Any]: ...


class Alone:
    """A job of one process: nothing to exchange."""

    rank, world = 0, 1

    def all_gather(self, value: Any) -> list[Any]:
        return [value]

    def gather(self, value: Any) -> list[Any] | None:
        return [value]


class ReadError(DataError):
    """A rank's failure, raised on every rank with the reason the job's status shows."""

    def __init__(self, message: str, reason: str = "InvalidData") -> None:
        super().__init__(message)
        self.reason = reason


def agreed(comm: Exchange, fn: Callable[[], T]) -> T:
    """fn() on every rank; when any rank fails, every rank raises the lowest failing rank's error."""
    result: Any = None
    failure: tuple[str, str] | None = None
    try:
        result = fn()
    except DataError as exc:
        if comm.world == 1:
            raise  # alone: the error as it is, its class and all
        failure = (str(exc), str(getattr(exc, "reason", "InvalidData")))
    failures = [f for f in comm.all_gather(failure) if f is not None]
    if failures:
        raise ReadError(*failures[0])
    return result


def mine(dataset: Dataset, comm: Exchange) -> list[Piece]:
    """This rank's pieces (pure given the dataset: every rank computes every rank's share alike)."""
    pieces = dataset.pieces()
    weights = (
        [dataset.piece_rows(p) or 0 for p in pieces] if dataset.format == "parquet" else [f.size for f in dataset.files]
    )
    return [pieces[i] for i in assign(weights, comm.world)[comm.rank]]


def windows(dataset: Dataset, pieces: Sequence[Piece]) -> list[list[Piece]]:
    """Consecutive pieces read together: at most WINDOW_PIECES, about WINDOW_BYTES uncompressed."""
    out: list[list[Piece]] = []
    size = 0
    for p in pieces:
        f = dataset.files[p.file]
        rows = dataset.piece_rows(p)
        weight = f.size if rows is None or not f.rows else (f.uncompressed_bytes or f.size) * rows // f.rows
        if not out or len(out[-1]) >= WINDOW_PIECES or size + weight > WINDOW_BYTES:
            out.append([])
            size = 0
        out[-1].append(p)
        size += weight
    return out


@dataclass
class Survey:
    """Pass 1 over this rank's pieces."""

    raw: list[int]  # rows of each piece
    kept: list[np.ndarray]  # each piece's rows that have a label (a boolean mask)
    label: summaries.LabelSummary | None
    counts: dict[str, Counter[str]]
    missing: dict[str, int]  # rows with a label and no value, per candidate column


def _label_values(col: pa.ChunkedArray) -> tuple[list[Any], bool]:
    distinct = pc.unique(col.drop_null()).to_pylist()
    whole = True
    if pat.is_floating(col.type) and len(col):
        present = col.drop_null()
        whole = bool(pc.all(pc.equal(pc.floor(present), present)).as_py() in (True, None))
    return distinct, whole


def survey(dataset: Dataset, pieces: Sequence[Piece], label: str, candidates: Sequence[str], source: str) -> Survey:
    if label not in dataset.schema.names:
        shown = ", ".join(dataset.schema.names[:8]) + (", ..." if len(dataset.schema.names) > 8 else "")
        raise DataError(f"{source}: label column {label!r} not found (columns: {shown})")
    numeric = is_numeric_type(dataset.schema.field(label).type)
    result = Survey([], [], summaries.LabelSummary(numeric=numeric), {c: Counter() for c in candidates},
                    dict.fromkeys(candidates, 0))  # fmt: skip
    for window in windows(dataset, pieces):
        for table in parallel(lambda p: read_pieces(dataset, [p], [label, *candidates]), window):
            keep = table.column(label).is_valid()
            mask = np.asarray(keep.to_numpy(zero_copy_only=False), dtype=bool)
            result.raw.append(table.num_rows)
            result.kept.append(mask)
            table = table.filter(keep)
            assert result.label is not None
            result.label.add(*_label_values(table.column(label)))
            for c in candidates:
                keys = keys_of(table.column(c))
                result.counts[c].update(counts_of(keys))
                result.missing[c] += keys.null_count
    return result


@dataclass
class Summary:
    """What a rank sends of its survey: counts, never rows."""

    rows: int  # rows with a label
    label: summaries.LabelSummary
    counts: dict[str, Counter[str]]  # each capped at summaries.SENT_PER_SHARD
    missing: dict[str, int]


def summary_of(found: Survey) -> Summary:
    assert found.label is not None
    counts = {c: summaries.shard_counts(v) for c, v in found.counts.items()}
    return Summary(sum(int(m.sum()) for m in found.kept), found.label, counts, found.missing)


def layout_of(dataset: Dataset, label: str, surveys: Sequence[Summary]) -> Layout:
    """The agreed columns from every rank's summary (pure: the same on every rank)."""
    rows = sum(s.rows for s in surveys)
    out = Layout(label=label, numeric=[], categorical=[])
    for f in dataset.schema:
        if f.name == label or pat.is_null(f.type):
            continue
        if f.name in surveys[0].counts:
            if sum(s.missing[f.name] for s in surveys) == rows:
                continue  # no value at all: no information, as the one-process encoder drops it
            out.categorical.append(f.name)
            out.categories[f.name] = summaries.top(
                summaries.merge_counts([s.counts[f.name] for s in surveys]), summaries._MAX_CATEGORIES
            )
        else:
            out.numeric.append(f.name)
        out.kinds[f.name] = kind_of(f.type)
    return out


def candidates_of(dataset: Dataset, label: str) -> list[str]:
    """Columns pass 1 reads: all but the numeric ones (their kind is their type; their missing values are counted
    while they are encoded)."""
    return [
        f.name for f in dataset.schema if f.name != label and not is_numeric_type(f.type) and not pat.is_null(f.type)
    ]


@dataclass
class Part:
    """One rank's rows of one table, encoded."""

    x: Encoded
    y: np.ndarray
    keys: np.ndarray  # uint64 identity of each row (folds)
    present: np.ndarray  # non-missing values per numeric column


def encode_part(
    dataset: Dataset, pieces: Sequence[Piece], found: Survey, layout: Layout, info: LabelInfo, source: str
) -> Part:
    """Pass 2: this rank's pieces into arrays allocated once."""
    n = sum(int(m.sum()) for m in found.kept)
    numeric = np.empty((n, len(layout.numeric)), dtype=np.float32)
    categorical = np.empty((n, len(layout.categorical)), dtype=np.int64)
    y = np.empty(n, dtype=np.float64 if info.problem_type == "regression" else np.int64)
    keys = np.empty(n, dtype=np.uint64)
    present = np.zeros(len(layout.numeric), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum([int(m.sum()) for m in found.kept])]).astype(np.int64)
    index = {p: i for i, p in enumerate(pieces)}
    columns = [*layout.features, layout.label]

    def one(p: Piece) -> np.ndarray:
        i = index[p]
        table = read_pieces(dataset, [p], columns).filter(pa.array(found.kept[i]))
        lo, hi = int(starts[i]), int(starts[i + 1])
        where = dataset.files[p.file].uri
        y[lo:hi] = info.encode(table.column(layout.label).to_pandas(), where, layout.label)
        table = table.drop_columns([layout.label])
        keys[lo:hi] = row_keys(p.file, p.row_group or 0, found.raw[i])[found.kept[i]]
        return encode_into(table, layout, numeric[lo:hi], categorical[lo:hi], where)

    for window in windows(dataset, pieces):
        for counted in parallel(one, window):
            present += counted
    return Part(Encoded(numeric, categorical), y, keys, present)


def offsets(comm: Exchange, pieces: Sequence[Piece], found: Survey, order: Sequence[Piece]) -> tuple[np.ndarray, int]:
    """Each of this rank's rows' index in the whole table (rows with a label, in dataset order), and their count."""
    mine_counts = {(p.file, p.row_group): int(m.sum()) for p, m in zip(pieces, found.kept, strict=True)}
    everyone: dict[tuple[int, int | None], int] = {}
    for part in comm.all_gather(mine_counts):
        everyone.update(part)
    start, first = 0, {}
    for p in order:
        first[(p.file, p.row_group)] = start
        start += everyone.get((p.file, p.row_group), 0)
    rows = [
        np.arange(first[k], first[k] + mine_counts[k], dtype=np.int64) for k in ((p.file, p.row_group) for p in pieces)
    ]
    return (np.concatenate(rows) if rows else np.empty(0, dtype=np.int64)), start


def finish_numeric(layout: Layout, x: Encoded, present: np.ndarray) -> tuple[Layout, Encoded]:
    """Numeric columns with no value in any row are dropped, as the one-process encoder drops them; ``present``:
    every rank's non-missing counts, summed."""
    keep = [j for j in range(len(layout.numeric)) if present[j] > 0]
    if len(keep) == len(layout.numeric):
        return layout, x
    for j in range(len(layout.numeric)):
        if present[j] == 0:
            layout.kinds.pop(layout.numeric[j], None)
    layout.numeric = [layout.numeric[j] for j in keep]
    return layout, Encoded(np.ascontiguousarray(x.numeric[:, keep]), x.categorical)


def preprocessor(layout: Layout) -> Preprocessor:
    pre = Preprocessor(list(layout.numeric), list(layout.categorical), dict(layout.categories), dict(layout.kinds))
    if not pre.feature_names:
        raise DataError(f"no feature columns besides the label {layout.label!r}")
    return pre
