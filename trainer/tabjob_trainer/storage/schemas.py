"""The rule for a dataset of several files: which schema differences are harmless, and hive partition directories.

Parquet files must carry the same columns (by name; their order may differ, the first file's order is kept) with
the same types, except for differences that lose nothing when the column is read as the wider type:

- integers of different widths or signedness: the wider integer (int32 and int64 -> int64, uint8 and int8 -> int16);
- integers and floats, or floats of different widths: float64 (as pandas writes an int column that has a missing
  value);
- a column that is all null in one file (Arrow type null): the other file's type;
- a dictionary-encoded column (pandas' category) and its plain value type: the value type (files that all carry
  the same dictionary type keep it);
- string and large_string; timestamps in different units with the same time zone (the finer unit).

Anything else (int and string, string and binary, timestamp and date, different time zones) refuses the dataset,
naming the first file that differs, the column, and both types.

CSV files carry no types: each file's are inferred from its text, so CSV columns must agree by name only, and their
types are unified the way pyarrow infers them across the rows of one file (null < int64 < float64, anything else
with a different type becomes string).

Hive partitions (`.../region=eu/year=2024/part-0.parquet`) become columns after the file's own, typed as pyarrow's
hive partitioning types them: int32 when every value is an integer that fits (int64 when one does not), else string;
`__HIVE_DEFAULT_PARTITION__` is a missing value; values are URL-decoded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.types as pat

from tabjob_trainer.errors import DataError

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_INT = re.compile(r"^-?\d+$")
_INT32 = (-(2**31), 2**31 - 1)

Merge = Callable[[pa.DataType, pa.DataType], pa.DataType | None]


def plain(t: pa.DataType) -> pa.DataType:
    """A dictionary-encoded type as the type of its values (pandas' category columns are written that way)."""
    return t.value_type if pat.is_dictionary(t) else t


def _permissive(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    unified = pa.unify_schemas([pa.schema([("c", a)]), pa.schema([("c", b)])], promote_options="permissive")
    return unified.field("c").type


def _stringlike(t: pa.DataType) -> bool:
    return bool(pat.is_string(t) or pat.is_large_string(t))


def merge_parquet(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type both read as without loss, or None when the difference is real (see the module's rule)."""
    if a == b:
        return a
    a, b = plain(a), plain(b)
    if a == b:
        return a
    if pat.is_null(a) or pat.is_null(b):
        return b if pat.is_null(a) else a
    if pat.is_integer(a) and pat.is_integer(b):
        return _permissive(a, b)
    if (pat.is_integer(a) or pat.is_floating(a)) and (pat.is_integer(b) or pat.is_floating(b)):
        return pa.float64()
    if _stringlike(a) and _stringlike(b):
        return pa.large_string()
    if pat.is_timestamp(a) and pat.is_timestamp(b) and a.tz == b.tz:
        return _permissive(a, b)
    return None


def merge_csv(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type pyarrow would infer had both files' rows been in one CSV file."""
    if a == b:
        return a
    a, b = plain(a), plain(b)
    if a == b:
        return a
    if pat.is_null(a) or pat.is_null(b):
        return b if pat.is_null(a) else a
    if (pat.is_integer(a) or pat.is_floating(a)) and (pat.is_integer(b) or pat.is_floating(b)):
        return pa.float64()
    return pa.string()


def unique_names(uri: str, schema: pa.Schema) -> None:
    names = schema.names
    repeated = [n for n in names if names.count(n) > 1]
    if repeated:
        raise DataError(
            f"{uri}: column {repeated[0]!r} appears {names.count(repeated[0])} times in the header; "
            "column names must be unique"
        )


def unify(files: Sequence[tuple[str, pa.Schema]], merge: Merge) -> pa.Schema:
    """One schema for all `files` ((uri, schema) in the dataset's order), or a DataError naming the first file that
    differs from the first file, and the column. The first file's column order and metadata are kept."""
    first_uri, first = files[0]
    unique_names(first_uri, first)
    types = {f.name: f.type for f in first}
    origin = dict.fromkeys(first.names, first_uri)  # the file that gave each column its type so far
    for uri, schema in files[1:]:
        unique_names(uri, schema)
        missing = [n for n in first.names if n not in schema.names]
        if missing:
            raise DataError(
                f"{uri}: column {missing[0]!r} is missing (it is in {first_uri}); the files of one dataset must "
                "have the same columns"
            )
        extra = [n for n in schema.names if n not in types]
        if extra:
            raise DataError(
                f"{uri}: column {extra[0]!r} is not in {first_uri}; the files of one dataset must have the same columns"
            )
        for field in schema:
            merged = merge(types[field.name], field.type)
            if merged is None:
                raise DataError(
                    f"{uri}: column {field.name!r} is {field.type} here but {types[field.name]} in "
                    f"{origin[field.name]}; the files of one dataset must agree on each column's type"
                )
            if merged != types[field.name]:
                types[field.name], origin[field.name] = merged, uri
    return pa.schema([pa.field(n, types[n]) for n in first.names], metadata=first.metadata)


# ------------------------------------------------------------------------------------------- hive partitions

Partition = tuple[tuple[str, str | None], ...]


def partition_of(relative: str) -> Partition:
    """The key=value directories of a file's path relative to the dataset's root, outermost first."""
    parts = relative.split("/")[:-1]
    out: list[tuple[str, str | None]] = []
    for part in parts:
        key, eq, value = part.partition("=")
        if eq and key:
            decoded = unquote(value)
            out.append((unquote(key), None if decoded == HIVE_NULL else decoded))
    return tuple(out)


def partition_fields(root: str, files: Sequence[tuple[str, Partition]], columns: Sequence[str]) -> list[pa.Field]:
    """The partition columns of `files` ((uri, partition)), typed; every file must sit under the same keys."""
    if not files or not files[0][1]:
        keys: tuple[str, ...] = ()
    else:
        keys = tuple(k for k, _ in files[0][1])
    first_uri = files[0][0] if files else root
    for uri, partition in files:
        these = tuple(k for k, _ in partition)
        if these != keys:

            def shown(k: tuple[str, ...]) -> str:
                return "/".join(f"{x}=..." for x in k) or "no partition directories"

            raise DataError(
                f"{uri}: sits under {shown(these)} but {first_uri} under {shown(keys)}; every file of a "
                f"partitioned dataset must sit under the same partition keys in the same order"
            )
    for key in keys:
        if key in columns:
            raise DataError(
                f"{first_uri}: column {key!r} is both a partition directory ({key}=...) and a column in the "
                "file; rename one of them"
            )
    fields = []
    for i, key in enumerate(keys):
        values = [p[i][1] for _, p in files]
        fields.append(pa.field(key, _partition_type([v for v in values if v is not None])))
    return fields


def _partition_type(values: Sequence[str]) -> pa.DataType:
    if values and all(_INT.match(v) for v in values):
        ints = [int(v) for v in values]
        if all(_INT32[0] <= n <= _INT32[1] for n in ints):
            return pa.int32()
        if all(-(2**63) <= n < 2**63 for n in ints):
            return pa.int64()
    return pa.string()


def partition_value(value: str | None, t: pa.DataType) -> int | str | None:
    if value is None:
        return None
    return int(value) if pat.is_integer(t) else value
