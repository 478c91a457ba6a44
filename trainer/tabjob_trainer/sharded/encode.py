"""One piece of a table, from Arrow straight into the model-ready arrays, column by column (no pandas frame).

The same rules as the one-process encoder (``preprocess.Preprocessor``) reading a Parquet file pandas wrote, decided
once for every rank from the table's schema and the merged summaries: integer, floating, timestamp and boolean
columns are numeric, as float32 with NaN for missing; every other column is categorical, its values compared
as the strings ``preprocess._key`` makes, coded by the agreed categories (-1: missing or unseen); a column with no
value at all is dropped. Each Arrow column is released as soon as it is converted, so a piece is held once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from tabjob_trainer.errors import DataError
from tabjob_trainer.preprocess import ColumnKind, _as_float, _key


def is_numeric_type(t: pa.DataType) -> bool:
    """Numeric as pandas reads a Parquet file pandas wrote: integers, floats, timestamps, and booleans (1/0, NaN for
    missing, as pandas' nullable boolean)."""
    return pat.is_integer(t) or pat.is_floating(t) or pat.is_timestamp(t) or pat.is_boolean(t)


def kind_of(t: pa.DataType) -> ColumnKind:
    if pat.is_boolean(t):
        return "boolean"
    if pat.is_integer(t):
        return "integer"
    if pat.is_timestamp(t):
        return "datetime"
    return "float" if pat.is_floating(t) else "text"


def keys_of(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """The column's values as the strings the encoder compares (``preprocess._key``), missing as null."""
    t = col.type
    if pat.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pat.is_string(t) or pat.is_large_string(t):
        return col.cast(pa.string())
    if pat.is_boolean(t):
        return pc.if_else(col, "True", "False")
    if pat.is_integer(t) or pat.is_date(t):
        return col.cast(pa.string())
    # Anything else as Python prints it, as the one-process reader compares it.
    return pa.chunked_array([pa.array([None if v is None else _key(v) for v in col.to_pylist()], pa.string())])


def counts_of(keys: pa.ChunkedArray) -> Counter[str]:
    found = pc.value_counts(keys.drop_null())
    return Counter(dict(zip(found.field("values").to_pylist(), found.field("counts").to_pylist(), strict=True)))


def numeric_of(col: pa.ChunkedArray) -> np.ndarray:
    """float32 values with NaN for missing."""
    if pat.is_timestamp(col.type):
        return _as_float(col.to_pandas()).astype(np.float32)
    if pat.is_boolean(col.type):
        col = col.cast(pa.uint8())
    return np.asarray(col.cast(pa.float32(), safe=False).to_numpy(zero_copy_only=False), dtype=np.float32)


@dataclass
class Layout:
    """The agreed columns: what each feature is and, for categorical ones, its categories in code order."""

    label: str
    numeric: list[str]
    categorical: list[str]
    categories: dict[str, list[str]] = field(default_factory=dict)
    kinds: dict[str, ColumnKind] = field(default_factory=dict)

    @property
    def features(self) -> list[str]:
        return self.numeric + self.categorical


def encode_into(
    table: pa.Table, layout: Layout, numeric: np.ndarray, categorical: np.ndarray, source: str
) -> np.ndarray:
    """Write ``table``'s features into ``numeric`` and ``categorical`` (rows of this piece), releasing each Arrow
    column once converted; the non-missing count of each numeric column."""
    present = np.zeros(len(layout.numeric), dtype=np.int64)
    for j, name in enumerate(layout.numeric):
        values = numeric_of(table.column(name))
        table = table.drop_columns([name])
        infinite = np.isinf(values)
        if infinite.any():
            raise DataError(
                f"{source}: column {name!r} holds {int(infinite.sum())} infinite value(s); use finite numbers, or "
                "leave the cell empty for a missing value"
            )
        numeric[:, j] = values
        present[j] = int(np.count_nonzero(~np.isnan(values)))
    for j, name in enumerate(layout.categorical):
        codes = pc.index_in(keys_of(table.column(name)), value_set=pa.array(layout.categories[name], pa.string()))
        table = table.drop_columns([name])
        categorical[:, j] = np.asarray(codes.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return present
