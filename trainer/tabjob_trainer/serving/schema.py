"""A run's Open Inference Protocol (V2) schema and the pure conversions between V2 tensors and its frames.

One input per feature column, typed as the column was in training (INT64 or FP64 numbers, BOOL, BYTES strings,
categories and dates), each a column of the request's rows; JSON ``null`` is a missing cell, as an empty CSV cell
is to `tabjob predict`. Outputs are exactly the columns of `tabjob predict`'s CSV. Every request the model cannot
answer raises ``RequestError`` with a message that names the input, which the server turns into a 400.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tabjob_trainer.preprocess import ColumnKind, Preprocessor
from tabjob_trainer.problem import LabelInfo

DATATYPE: dict[ColumnKind, str] = {
    "integer": "INT64",
    "float": "FP64",
    "boolean": "BOOL",
    "datetime": "BYTES",  # ISO 8601 text, e.g. "2024-05-01T12:00:00"
    "text": "BYTES",
}
NUMBERS = {f"INT{b}" for b in (8, 16, 32, 64)} | {f"UINT{b}" for b in (8, 16, 32, 64)} | {"FP16", "FP32", "FP64"}
# Which request datatypes each kind of column takes: any number for a number (the models see float32 anyway),
# numbers or BOOL for a boolean, text for the rest.
ACCEPTED: dict[ColumnKind, set[str]] = {
    "integer": NUMBERS,
    "float": NUMBERS,
    "boolean": NUMBERS | {"BOOL"},
    "datetime": {"BYTES"},
    "text": {"BYTES"},
}


class RequestError(ValueError):
    """A request the model cannot answer; the message names the input and what it should be."""


@dataclass(frozen=True)
class Tensor:
    """One V2 tensor as JSON carries it: ``data`` flat or nested, in row-major order."""

    name: str
    datatype: str
    shape: list[int]
    data: list[Any]


def input_metadata(pre: Preprocessor) -> list[Tensor]:
    return [Tensor(col, DATATYPE[pre.kinds[col]], [-1, 1], []) for col in pre.feature_names]


def prediction_datatype(label: LabelInfo) -> str:
    """The datatype of the ``prediction`` output: the labels' own type (strings are BYTES)."""
    if label.problem_type == "regression":
        return "FP64"
    classes = label.classes
    if all(isinstance(c, bool) for c in classes):
        return "BOOL"
    if all(isinstance(c, int) and not isinstance(c, bool) for c in classes):
        return "INT64"
    if all(isinstance(c, int | float) and not isinstance(c, bool) for c in classes):
        return "FP64"
    return "BYTES"


def output_metadata(label: LabelInfo, columns: list[str]) -> list[Tensor]:
    first = Tensor(columns[0], prediction_datatype(label), [-1, 1], [])
    return [first] + [Tensor(col, "FP64", [-1, 1], []) for col in columns[1:]]


def flat(data: Any) -> list[Any]:
    if not isinstance(data, list):
        return [data]
    if not any(isinstance(v, list) for v in data):
        return data
    return [v for item in data for v in flat(item)]


def _rows(tensor: Tensor) -> int:
    values = len(flat(tensor.data))
    shape = tensor.shape
    if not shape or any(d < 0 for d in shape) or math.prod(shape[1:]) != 1:
        raise RequestError(f"input {tensor.name!r}: shape {shape} is not one column of rows; use [rows] or [rows, 1]")
    if shape[0] != values:
        raise RequestError(f"input {tensor.name!r}: shape {shape} says {shape[0]} rows but data holds {values} values")
    return shape[0]


def _number(name: str, datatype: str, v: Any) -> float:
    if v is None:
        return math.nan
    if isinstance(v, bool):
        if datatype == "BOOL":
            return float(v)
        raise RequestError(f"input {name!r} ({datatype}): {str(v).lower()} is not a number; send numbers or null")
    if isinstance(v, int | float):
        return float(v)
    raise RequestError(f"input {name!r} ({datatype}): {v!r} is not a number; send numbers, or null for a missing value")


def _text(name: str, v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            raise RequestError(f"input {name!r} (BYTES): a value is not UTF-8 text") from None
    raise RequestError(f"input {name!r} (BYTES): {v!r} is not text; send strings, or null for a missing value")


def _column(name: str, kind: ColumnKind, tensor: Tensor) -> pd.Series:
    if tensor.datatype not in ACCEPTED[kind]:
        wanted = DATATYPE[kind]
        raise RequestError(
            f"input {name!r}: datatype {tensor.datatype} where the model takes {wanted} (a {kind} column)"
        )
    values = flat(tensor.data)
    if kind in ("integer", "float", "boolean"):
        return pd.Series([_number(name, tensor.datatype, v) for v in values], dtype=np.float64)
    texts = [_text(name, v) for v in values]
    if kind == "text":
        return pd.Series(texts, dtype=object)
    try:
        return pd.Series(pd.to_datetime(pd.Series(texts, dtype=object)))
    except (ValueError, TypeError) as exc:
        raise RequestError(f"input {name!r} (BYTES): not a date and time as in training ({exc})") from None


def frame_from_inputs(pre: Preprocessor, inputs: list[Tensor]) -> pd.DataFrame:
    """The rows of a request as the columns the run was trained on; inputs it was not trained on are ignored."""
    by_name = {t.name: t for t in inputs}
    missing = [c for c in pre.feature_names if c not in by_name]
    if missing:
        wanted = ", ".join(f"{c} ({DATATYPE[pre.kinds[c]]})" for c in missing[:5])
        raise RequestError(
            f"input {missing[0]!r} is missing; the model takes one input per feature column, missing: {wanted}"
        )
    rows = {c: _rows(by_name[c]) for c in pre.feature_names}
    first = pre.feature_names[0]
    for col, n in rows.items():
        if n != rows[first]:
            raise RequestError(
                f"inputs have different lengths: {first!r} has {rows[first]} rows, {col!r} has {n}; "
                "send one value per row in every input"
            )
    return pd.DataFrame({c: _column(c, pre.kinds[c], by_name[c]) for c in pre.feature_names})


def outputs_from_frame(frame: pd.DataFrame, prediction: str) -> list[Tensor]:
    """``tabjob predict``'s columns as V2 output tensors, with Python values so JSON carries them exactly."""
    out = []
    for i, col in enumerate(frame.columns):
        data = frame[col].tolist()
        out.append(Tensor(str(col), prediction if i == 0 else "FP64", [len(frame), 1], data))
    return out
