"""A table is a file or a dataset: what `data.train` / `data.test` name, opened as its structure before any row.

`open_dataset(uri)` accepts a Parquet or CSV file, or a directory / prefix of such files (local, on a volume, s3://,
gs://, any fsspec scheme), with hive partition directories (`region=eu/`) that become columns. It lists the files,
reads each Parquet footer (row groups, row counts, sizes) or peeks at each CSV header, and checks that the files
agree on their columns (storage/schemas.py has the rule), so a bad dataset fails before a byte of data moves.

The `Dataset` it returns is the structure later steps split work by: the files in a fixed order, each Parquet file's
row groups with their row counts (pieces that training ranks and scoring shards read on their own, straight from
the source), the unified schema, total rows and the uncompressed size the footers declare. `read` and `read_pieces`
read all of it or some pieces, through the same `filesystem(uri)`, with no local copy: each piece straight from its
file, several files at a time; a Parquet file opened with the footer `open_dataset` already read and its column
chunks pre-buffered (pyarrow coalesces nearby ranges into few large requests). Columns come out in the dataset's
order with its unified types (a file whose column is narrower is cast up), then the partition columns, constant
within a file.

A directory or prefix: every file under it, recursively, whose name ends in a Parquet (.parquet, .pq, .parq) or CSV
(.csv, .csv.gz, .csv.bz2, .tsv, .txt) suffix, sorted by path; files and directories whose names start with `_` or
`.` are skipped (`_SUCCESS`, `_metadata`, `.crc`, `_temporary/`), as Spark and pyarrow skip them, and so are files
with other suffixes (a README, a JSON manifest). An empty CSV file (0 bytes) in a directory adds nothing and is
skipped; one named on its own is an error, as is any empty Parquet file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pyarrow.types as pat

from tabjob_trainer.errors import DataError
from tabjob_trainer.storage import schemas
from tabjob_trainer.storage.filesystems import filesystem, not_found, scheme_of
from tabjob_trainer.storage.structure import (
    CSV_SUFFIXES,
    PARQUET_SUFFIXES,
    DataFile,
    Dataset,
    Format,
    Piece,
    csv_options,
    guarded,
    is_csv_name,
    is_parquet_name,
    parallel,
)

__all__ = ["DataFile", "Dataset", "Piece", "open_dataset", "read", "read_pieces"]


def open_dataset(uri: str) -> Dataset:
    """The dataset `uri` names, listed and checked (module docstring); DataError / StorageError on any fault."""
    fs, root = filesystem(uri)
    info = guarded(uri, lambda: fs.get_file_info(root))
    if info.type == pafs.FileType.NotFound:
        raise _missing(uri, fs, root)
    if info.type == pafs.FileType.File:
        if info.size == 0:
            raise DataError(f"{uri}: the file is empty (0 bytes)")
        kind: Format = "parquet" if _sniff_parquet(uri, fs, root) else "csv"
        found = [(uri, root, int(info.size or 0))]
        partitions: list[schemas.Partition] = [()]
    else:
        kind, found, partitions = _list(uri, fs, root)
    if kind == "parquet":
        return _open_parquet(uri, fs, found, partitions)
    return _open_csv(uri, fs, found, partitions)


def _missing(uri: str, fs: pafs.FileSystem, root: str) -> DataError:
    if scheme_of(uri) in ("s3", "gs"):
        bucket = root.split("/", 1)[0]
        if "/" not in root or guarded(uri, lambda: fs.get_file_info(bucket)).type == pafs.FileType.NotFound:
            return not_found(uri, bucket_missing=True)
    return not_found(uri)


def _sniff_parquet(uri: str, fs: pafs.FileSystem, path: str) -> bool:
    if is_parquet_name(path):
        return True
    if is_csv_name(path):
        return False

    # No telling suffix: Parquet files start with the magic bytes PAR1.
    def head() -> bytes:
        with fs.open_input_stream(path, compression=None) as fh:
            return bytes(fh.read(4))

    return guarded(uri, head) == b"PAR1"


def _skipped(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def _list(uri: str, fs: pafs.FileSystem, root: str) -> tuple[Format, list[tuple[str, str, int]], list[Any]]:
    """(format, [(file uri, path, size)], [partition]) under the directory or prefix `root`, sorted by path."""
    selector = pafs.FileSelector(root, recursive=True)
    entries = guarded(uri, lambda: fs.get_file_info(selector))
    base = root.rstrip("/") + "/"
    parquet: list[tuple[str, str, int]] = []
    csv: list[tuple[str, str, int]] = []
    ignored: list[str] = []
    for entry in sorted((e for e in entries if e.type == pafs.FileType.File), key=lambda e: e.path):
        relative = entry.path[len(base) :] if entry.path.startswith(base) else entry.base_name
        found = (f"{uri.rstrip('/')}/{relative}", entry.path, int(entry.size or 0))
        if _skipped(relative):
            ignored.append(relative)
        elif is_parquet_name(relative):
            parquet.append(found)
        elif is_csv_name(relative):
            if found[2] > 0:  # an empty part file holds no rows and no header: nothing to read
                csv.append(found)
            else:
                ignored.append(relative)
        else:
            ignored.append(relative)
    if parquet and csv:
        raise DataError(
            f"{uri}: mixes Parquet ({parquet[0][0]}) and CSV ({csv[0][0]}) files; put each table under its own prefix"
        )
    files = parquet or csv
    if not files:
        if ignored:
            shown = ", ".join(ignored[:5]) + (f" and {len(ignored) - 5} more" if len(ignored) > 5 else "")
            what = f"found only {len(ignored)} other file(s): {shown}"
        else:
            what = "it is empty"
        raise DataError(
            f"{uri}: no data files under it (names ending in {', '.join(PARQUET_SUFFIXES + CSV_SUFFIXES)}; names "
            f"starting with _ or . are skipped); {what}"
        )
    partitions = [schemas.partition_of(path[len(base) :]) for _, path, _ in files]
    return ("parquet" if parquet else "csv"), files, partitions


def _typed_partitions(
    uri: str, found: list[tuple[str, str, int]], partitions: list[schemas.Partition], columns: list[str]
) -> tuple[list[pa.Field], list[tuple[tuple[str, int | str | None], ...]]]:
    fields = schemas.partition_fields(uri, [(f[0], p) for f, p in zip(found, partitions, strict=True)], columns)
    typed = [
        tuple((k, schemas.partition_value(v, fld.type)) for (k, v), fld in zip(p, fields, strict=True))
        for p in partitions
    ]
    return fields, typed


def _open_parquet(
    uri: str, fs: pafs.FileSystem, found: list[tuple[str, str, int]], partitions: list[schemas.Partition]
) -> Dataset:
    def footer(item: tuple[str, str, int]) -> pq.FileMetaData:
        file_uri, path, size = item
        if size == 0:
            raise DataError(f"{file_uri}: the file is empty (0 bytes)")

        def read() -> pq.FileMetaData:
            with fs.open_input_file(path) as fh:
                return pq.ParquetFile(fh).metadata

        return guarded(file_uri, read, "Parquet")

    footers = parallel(footer, found)
    file_schemas = [
        (f[0], guarded(f[0], md.schema.to_arrow_schema, "Parquet")) for f, md in zip(found, footers, strict=True)
    ]
    schema = schemas.unify(file_schemas, schemas.merge_parquet)
    fields, typed = _typed_partitions(uri, found, partitions, schema.names)
    files = tuple(
        DataFile(
            uri=file_uri,
            path=path,
            size=size,
            rows=md.num_rows,
            row_groups=tuple(md.row_group(g).num_rows for g in range(md.num_row_groups)),
            partition=part,
            uncompressed_bytes=sum(md.row_group(g).total_byte_size for g in range(md.num_row_groups)),
            metadata=md,
        )
        for (file_uri, path, size), md, part in zip(found, footers, typed, strict=True)
    )
    return Dataset(
        uri=uri,
        format="parquet",
        files=files,
        schema=_with_partitions(schema, fields),
        partitioning=tuple(f.name for f in fields),
        rows=sum(f.rows or 0 for f in files),
        uncompressed_bytes=sum(f.uncompressed_bytes or 0 for f in files),
    )


def _with_partitions(schema: pa.Schema, fields: list[pa.Field]) -> pa.Schema:
    for f in fields:
        schema = schema.append(f)
    return schema


def _open_csv(
    uri: str, fs: pafs.FileSystem, found: list[tuple[str, str, int]], partitions: list[schemas.Partition]
) -> Dataset:
    def header(item: tuple[str, str, int]) -> pa.Schema:
        file_uri, path, _ = item

        def peek() -> pa.Schema:
            # The header and the first block's inferred types; a file's full read may widen them.
            with fs.open_input_stream(path) as fh:
                schema = pacsv.open_csv(fh, **csv_options(path)).schema
            # Undecodable as UTF-8 (kept as binary here): such a column is read as Latin-1 text.
            return pa.schema([pa.field(f.name, pa.string()) if pat.is_binary(f.type) else f for f in schema])

        return guarded(file_uri, peek, "CSV")

    schema = schemas.unify(list(zip([f[0] for f in found], parallel(header, found), strict=True)), schemas.merge_csv)
    fields, typed = _typed_partitions(uri, found, partitions, schema.names)
    files = tuple(
        DataFile(uri=file_uri, path=path, size=size, rows=None, partition=part)
        for (file_uri, path, size), part in zip(found, typed, strict=True)
    )
    return Dataset(
        uri=uri,
        format="csv",
        files=files,
        schema=_with_partitions(schema, fields),
        partitioning=tuple(f.name for f in fields),
        rows=None,
        uncompressed_bytes=None,
    )


# -------------------------------------------------------------------------------------------------------- reading


Task = tuple[int, tuple[int, ...] | None]  # (file index, its row groups to read; None: the whole file)


def read(dataset: Dataset) -> pa.Table:
    """Every row of the dataset, files in the dataset's order."""
    return read_pieces(dataset, [Piece(i) for i in range(len(dataset.files))])


def read_pieces(
    dataset: Dataset, pieces: Iterable[Piece | tuple[int, int | None]], columns: Sequence[str] | None = None
) -> pa.Table:
    """The rows of `pieces`, in the order given: (file index, row group index) for Parquet, (file index, None) for a
    whole file (the only kind of piece a CSV file has). `columns`: only these, in the dataset's order (a Parquet file
    then reads nothing of the others)."""
    tasks = _tasks(dataset, [Piece(*p) for p in pieces])
    wanted = None if columns is None else set(columns)
    if not tasks:
        empty = dataset.schema.empty_table()
        return empty if wanted is None else empty.select([n for n in empty.column_names if n in wanted])
    fs, _ = filesystem(dataset.uri)
    if dataset.format == "parquet":
        return pa.concat_tables(parallel(lambda t: _parquet(dataset, fs, t, wanted), tasks))
    table = _csv(dataset, fs, tasks)
    return table if wanted is None else table.select([n for n in table.column_names if n in wanted])


def _tasks(dataset: Dataset, pieces: Sequence[Piece]) -> list[Task]:
    """The pieces checked, and consecutive row groups of one file merged into one read of that file."""
    tasks: list[tuple[int, list[int] | None]] = []
    for piece in pieces:
        if not 0 <= piece.file < len(dataset.files):
            raise IndexError(f"{dataset.uri}: no file {piece.file}; the dataset has {len(dataset.files)}")
        groups = len(dataset.files[piece.file].row_groups)
        if piece.row_group is not None and (dataset.format == "csv" or not 0 <= piece.row_group < groups):
            raise IndexError(
                f"{dataset.files[piece.file].uri}: no row group {piece.row_group}; "
                + ("a CSV file is one piece (row group None)" if dataset.format == "csv" else f"it has {groups}")
            )
        last = tasks[-1] if tasks else None
        if last is not None and last[0] == piece.file and last[1] is not None and piece.row_group is not None:
            last[1].append(piece.row_group)
        else:
            tasks.append((piece.file, None if piece.row_group is None else [piece.row_group]))
    return [(i, None if groups is None else tuple(groups)) for i, groups in tasks]


def _file_columns(dataset: Dataset) -> list[pa.Field]:
    return [f for f in dataset.schema if f.name not in dataset.partitioning]


def _parquet(dataset: Dataset, fs: pafs.FileSystem, task: Task, wanted: set[str] | None = None) -> pa.Table:
    index, groups = task
    f = dataset.files[index]
    columns = [c for c in _file_columns(dataset) if wanted is None or c.name in wanted]
    names = None if wanted is None else [c.name for c in columns]

    def read() -> pa.Table:
        with fs.open_input_file(f.path) as fh:
            pf = pq.ParquetFile(fh, metadata=f.metadata, pre_buffer=True)
            return pf.read(columns=names) if groups is None else pf.read_row_groups(list(groups), columns=names)

    table = guarded(f.uri, read, "Parquet")
    return _conform(dataset, f, table, columns, wanted)


def _conform(
    dataset: Dataset, f: DataFile, table: pa.Table, columns: Sequence[pa.Field], wanted: set[str] | None = None
) -> pa.Table:
    """`table` (one file's rows) with the dataset's columns, in its order and types, and the partition columns."""
    arrays: list[pa.ChunkedArray] = []
    for target in columns:
        if target.name not in table.column_names:
            # The file changed since the dataset was opened, or it is a CSV file whose full read saw another header.
            raise DataError(f"{f.uri}: column {target.name!r} is missing; the files of one dataset must agree")
        column = table.column(target.name)
        if column.type != target.type:
            try:
                column = column.cast(target.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise DataError(
                    f"{f.uri}: column {target.name!r}: cannot read its {column.type} values as {target.type}, "
                    f"the type the dataset's other files give it: {str(exc).splitlines()[0]}"
                ) from None
        arrays.append(column)
    fields = list(columns)
    partition_types = {fld.name: fld.type for fld in dataset.schema if fld.name in dataset.partitioning}
    for name, value in f.partition:
        if wanted is not None and name not in wanted:
            continue
        arrays.append(pa.chunked_array([pa.repeat(pa.scalar(value, partition_types[name]), table.num_rows)]))
        fields.append(pa.field(name, partition_types[name]))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=dataset.schema.metadata))


# ------------------------------------------------------------------------------------------------------- CSV


def _read_csv(fs: pafs.FileSystem, f: DataFile, strings: Sequence[str] = ()) -> pa.Table:
    """One CSV file; undecodable UTF-8 is read as Latin-1; columns in `strings` are read as text, not inferred."""

    def read(encoding: str) -> pa.Table:
        options = csv_options(f.path, encoding)
        if strings:
            options["convert_options"].column_types = dict.fromkeys(strings, pa.string())
        with fs.open_input_stream(f.path) as fh:
            return pacsv.read_csv(fh, **options)

    table = guarded(f.uri, lambda: read("utf8"), "CSV")
    if any(pat.is_binary(t) or pat.is_large_binary(t) for t in table.schema.types):
        # Not valid UTF-8: pyarrow keeps such columns as bytes, whose categories would never match the same rows
        # saved as UTF-8. Such files are almost always Latin-1 (Excel, older exports): decode the file as that.
        table = guarded(f.uri, lambda: read("latin1"), "CSV")
    schemas.unique_names(f.uri, table.schema)
    return table


def _csv(dataset: Dataset, fs: pafs.FileSystem, tasks: Sequence[Task]) -> pa.Table:
    files = [dataset.files[i] for i, _ in tasks]
    tables = parallel(lambda f: _read_csv(fs, f), files)
    names = [f.name for f in _file_columns(dataset)]
    for f, table in zip(files, tables, strict=True):
        if sorted(table.column_names) != sorted(names):
            raise DataError(
                f"{f.uri}: its columns ({', '.join(table.column_names)}) are not the dataset's ({', '.join(names)})"
            )
    types = {n: tables[0].schema.field(n).type for n in names}
    for table in tables[1:]:
        for n in names:
            types[n] = schemas.merge_csv(types[n], table.schema.field(n).type)
    columns = [pa.field(n, types[n]) for n in names]
    out = []
    for f, table in zip(files, tables, strict=True):
        # A column that is text in another file is read again as text here: "007" stays "007", not 7 cast back.
        retyped = [
            n
            for n in names
            if pat.is_string(types[n])
            and not pat.is_null(table.schema.field(n).type)
            and not pat.is_string(table.schema.field(n).type)
        ]
        if retyped:
            table = _read_csv(fs, f, retyped)
        out.append(_conform(dataset, f, table, columns))
    return pa.concat_tables(out)
