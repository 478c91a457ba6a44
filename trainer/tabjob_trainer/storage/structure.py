"""What a dataset is made of (files, row groups, pieces), and the few helpers every step of reading one shares."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeVar

import pyarrow as pa
import pyarrow.csv as pacsv

from tabjob_trainer.errors import DataError
from tabjob_trainer.storage.filesystems import storage_error, store_failure

PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".tsv", ".txt")
# Files opened at once when a dataset is listed or read: an object store answers each request after a round trip,
# so several in flight keep the link busy; pyarrow decodes on its own CPU pool meanwhile.
CONCURRENCY = 8

Format = Literal["parquet", "csv"]
T = TypeVar("T")
R = TypeVar("R")


class Piece(NamedTuple):
    """A unit of reading: one row group of a Parquet file, or (row_group None) a whole file."""

    file: int
    row_group: int | None = None


@dataclass(frozen=True)
class DataFile:
    uri: str  # as the user would write it: the dataset's URI joined with the path below it
    path: str  # within the dataset's filesystem
    size: int  # bytes, as stored
    rows: int | None  # None for CSV: counting a CSV file's rows means reading it
    row_groups: tuple[int, ...] = ()  # rows in each row group (Parquet)
    partition: tuple[tuple[str, int | str | None], ...] = ()  # hive partition values, outermost first
    uncompressed_bytes: int | None = None  # the footer's sum of the row groups' uncompressed sizes (Parquet)
    # The Parquet footer, kept so reading does not fetch it again; absent in a Dataset rebuilt from its fields.
    metadata: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Dataset:
    uri: str
    format: Format
    files: tuple[DataFile, ...]
    schema: pa.Schema  # the files' columns, then the partition columns; for CSV as inferred from each file's start
    partitioning: tuple[str, ...]  # the partition columns' names
    rows: int | None  # None for CSV
    uncompressed_bytes: int | None  # None for CSV

    @property
    def single_file(self) -> bool:
        return len(self.files) == 1 and self.files[0].uri == self.uri

    def pieces(self) -> list[Piece]:
        """Every row group of every file in order (Parquet), or every file (CSV)."""
        if self.format == "csv":
            return [Piece(i) for i in range(len(self.files))]
        return [Piece(i, g) for i, f in enumerate(self.files) for g in range(len(f.row_groups))]

    def piece_rows(self, piece: Piece) -> int | None:
        f = self.files[piece.file]
        return f.rows if piece.row_group is None else f.row_groups[piece.row_group]


def is_parquet_name(path: str) -> bool:
    return path.lower().endswith(PARQUET_SUFFIXES)


def is_csv_name(path: str) -> bool:
    return path.lower().endswith(CSV_SUFFIXES)


def guarded(uri: str, fn: Callable[[], T], kind: str | None = None) -> T:
    """fn(), with a store's failure as a StorageError and (when `kind` is given) unreadable bytes as a DataError."""
    try:
        return fn()
    except DataError:
        raise
    except (OSError, pa.ArrowException, ValueError) as exc:
        if store_failure(exc) or kind is None:
            if isinstance(exc, OSError):
                raise storage_error(uri, exc) from None
            raise
        first = readable(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        if "Empty CSV file" in first:
            raise DataError(f"{uri}: the file is empty (no header, no rows)") from None
        raise DataError(f"{uri}: cannot read it as {kind}: {first}") from None


def readable(message: str) -> str:
    """pyarrow echoes the offending row, which in a binary file is noise: keep the reason, printable, short."""
    message = re.sub(r"(Expected \d+ columns, got \d+):.*", r"\1 in a row (is it a CSV file?)", message)
    message = re.sub(r"Row #\d+: ", "", message)  # the streaming reader's (peeking at a header) says where
    message = "".join(c if c.isprintable() else "?" for c in message)
    return message if len(message) <= 200 else message[:197] + "..."


def parallel(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """fn over items, several at a time, results in order; the first failure (in order) is raised."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    pool = ThreadPoolExecutor(max_workers=min(CONCURRENCY, len(items)), thread_name_prefix="tabjob-read")
    try:
        return list(pool.map(fn, items))
    finally:
        # After a failure, the files not yet started are not read (nor retried against a failing store).
        pool.shutdown(wait=True, cancel_futures=True)


def csv_options(path: str, encoding: str = "utf8") -> dict[str, Any]:
    # Empty cells are missing values in string columns too, as pandas reads them (pyarrow's default is "").
    options: dict[str, Any] = {
        "read_options": pacsv.ReadOptions(encoding=encoding),
        "convert_options": pacsv.ConvertOptions(strings_can_be_null=True),
    }
    if path.lower().endswith(".tsv"):
        options["parse_options"] = pacsv.ParseOptions(delimiter="\t")
    return options
