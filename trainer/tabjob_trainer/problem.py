"""The label: problem-type inference, validation and encoding, all pure.

Inference follows AutoGluon's rules closely: non-numeric labels are classes; two distinct values are binary;
a numeric label whose values are whole numbers with few distinct values is multiclass; anything else is
regression.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from tabjob_trainer.errors import DataError

ProblemType = Literal["binary", "multiclass", "regression"]
_MAX_CLASSES_FOR_INT = 20


@dataclass(frozen=True)
class LabelInfo:
    """How labels map to model targets; saved with the run so predict decodes the same way."""

    problem_type: ProblemType
    classes: list[Any]  # original label values, position = encoded class; empty for regression

    def encode(self, y: pd.Series, source: str, label: str) -> np.ndarray:
        if self.problem_type == "regression":
            return _numeric(y, source, label).astype(np.float64)
        # Vectorised lookup: a Python-level map over a million labels costs seconds.
        codes = pd.Index(self.classes).get_indexer(y).astype(np.int64)
        unknown = y[codes < 0]
        if len(unknown):
            raise DataError(
                f"{source}: column {label!r} holds classes not seen in the training data, e.g. "
                f"{_plain(unknown.iloc[0])!r}"
            )
        return codes

    def decode(self, codes: np.ndarray) -> np.ndarray:
        return np.asarray(self.classes, dtype=object)[codes]

    def to_dict(self) -> dict[str, Any]:
        return {"problemType": self.problem_type, "classes": self.classes}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LabelInfo:
        return cls(problem_type=d["problemType"], classes=list(d["classes"]))


def _plain(v: Any) -> Any:
    """numpy scalars to Python ones so classes survive JSON and compare equal after a reload."""
    return v.item() if isinstance(v, np.generic) else v


def _numeric(y: pd.Series, source: str, label: str) -> np.ndarray:
    values = pd.to_numeric(y, errors="coerce")
    bad = y[values.isna() & y.notna()]
    if len(bad):
        raise DataError(f"{source}: column {label!r} must be numeric for regression but holds {bad.iloc[0]!r}")
    out = values.to_numpy(dtype=np.float64)
    infinite = np.flatnonzero(np.isinf(out))
    if len(infinite):
        # An infinite target makes every error metric infinite: the fit would be scored -inf and kept.
        raise DataError(
            f"{source}: column {label!r} holds {len(infinite)} infinite value(s), first in data row "
            f"{infinite[0] + 1}; labels must be finite numbers"
        )
    return out


def infer_problem_type(y: pd.Series) -> ProblemType:
    y = y.dropna()
    if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
        return "binary" if y.nunique() <= 2 else "multiclass"
    n_unique = y.nunique()
    if n_unique <= 2:
        return "binary"
    whole = bool(np.all(np.mod(y.to_numpy(dtype=np.float64), 1.0) == 0))
    if whole and n_unique <= _MAX_CLASSES_FOR_INT and n_unique < 0.5 * len(y):
        return "multiclass"
    return "regression"


def resolve_label(df: pd.DataFrame, label: str, problem_type: str, source: str) -> LabelInfo:
    """Check the label column and decide the problem; every failure names the file and the column."""
    if label not in df.columns:
        shown = ", ".join(map(str, list(df.columns)[:8])) + (", ..." if len(df.columns) > 8 else "")
        raise DataError(f"{source}: label column {label!r} not found (columns: {shown})")
    y = df[label]
    present = y.dropna()
    if present.empty:
        raise DataError(f"{source}: label column {label!r} has no values (all missing)")
    kind: ProblemType = infer_problem_type(y) if problem_type == "auto" else problem_type  # type: ignore[assignment]
    if kind == "regression":
        _numeric(present, source, label)
        return LabelInfo("regression", [])
    classes = sorted({_plain(v) for v in present}, key=lambda v: (str(type(v)), v))
    if len(classes) < 2:
        raise DataError(
            f"{source}: label column {label!r} has a single class ({classes[0]!r}); classification needs at least two"
        )
    if kind == "binary" and len(classes) > 2:
        raise DataError(f"{source}: label column {label!r} has {len(classes)} classes but problemType is binary")
    return LabelInfo(kind, classes)
