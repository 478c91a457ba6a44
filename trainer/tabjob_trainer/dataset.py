"""From the spec's data section to arrays the models train on: read, check the label, preprocess."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tabjob.results_model import DataSummary
from tabjob_trainer.data import read_table
from tabjob_trainer.errors import DataError
from tabjob_trainer.metrics import resolve_metric
from tabjob_trainer.preprocess import Encoded, Preprocessor
from tabjob_trainer.problem import LabelInfo, resolve_label


@dataclass
class Prepared:
    x: Encoded
    y: np.ndarray
    label: LabelInfo
    pre: Preprocessor
    metric: str
    x_test: Encoded | None = None
    y_test: np.ndarray | None = None

    @property
    def n_classes(self) -> int:
        return len(self.label.classes)


def prepare(train: str, label: str, problem_type: str, eval_metric: str, test: str | None = None) -> Prepared:
    df = read_table(train)
    info = resolve_label(df, label, problem_type, train)
    df = _drop_missing_labels(df, label)
    try:
        metric = resolve_metric(eval_metric, info.problem_type)
    except ValueError as exc:
        raise DataError(f"{train}: column {label!r}: {exc}") from None
    pre = Preprocessor.fit(df, label)
    out = Prepared(pre.transform(df, train), info.encode(df[label], train, label), info, pre, metric)
    if test:
        tdf = read_table(test)
        if label not in tdf.columns:
            raise DataError(f"{test}: label column {label!r} not found in the test data")
        tdf = _drop_missing_labels(tdf, label)
        out.x_test = pre.transform(tdf, test)
        out.y_test = info.encode(tdf[label], test, label)
    return out


def _drop_missing_labels(df: pd.DataFrame, label: str) -> pd.DataFrame:
    keep = df[label].notna()
    return df if bool(keep.all()) else df[keep].reset_index(drop=True)


def data_summary(p: Prepared) -> DataSummary:
    return DataSummary(
        rows=len(p.x),
        features=len(p.pre.feature_names),
        categorical=len(p.pre.categorical),
        problem_type=p.label.problem_type,
        classes=len(p.label.classes),
        eval_metric=p.metric,
        test_rows=len(p.x_test) if p.x_test is not None else 0,
    )
