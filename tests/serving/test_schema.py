"""The V2 schema of a run, pure: datatypes per column kind, requests turned into frames, and every refusal naming
the input it is about."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tabjob_trainer.preprocess import Preprocessor
from tabjob_trainer.problem import LabelInfo
from tabjob_trainer.serving.schema import (
    RequestError,
    Tensor,
    frame_from_inputs,
    input_metadata,
    output_metadata,
    prediction_datatype,
)


def _trained() -> Preprocessor:
    df = pd.DataFrame(
        {
            "count": pd.Series([1, 2, 3], dtype="int64"),
            "ratio": [0.5, np.nan, 1.5],
            "flag": [True, False, True],
            "when": pd.to_datetime(["2024-01-01", "2024-02-01", "2024-03-01"]),
            "colour": ["red", None, "blue"],
            "label": [0, 1, 0],
        }
    )
    return Preprocessor.fit(df, "label")


def _request(n: int = 2, **override: Tensor) -> list[Tensor]:
    base = {
        "count": Tensor("count", "INT64", [n], [7, None][:n]),
        "ratio": Tensor("ratio", "FP64", [n, 1], [[0.25], [None]][:n]),
        "flag": Tensor("flag", "BOOL", [n], [True, None][:n]),
        "when": Tensor("when", "BYTES", [n], ["2024-01-15T10:00:00", None][:n]),
        "colour": Tensor("colour", "BYTES", [n], ["red", None][:n]),
    }
    base.update(override)
    return list(base.values())


def test_each_column_kind_has_its_v2_datatype() -> None:
    pre = _trained()
    assert pre.kinds == {"count": "integer", "ratio": "float", "flag": "boolean", "when": "datetime", "colour": "text"}
    assert {t.name: t.datatype for t in input_metadata(pre)} == {
        "count": "INT64",
        "ratio": "FP64",
        "flag": "BOOL",
        "when": "BYTES",
        "colour": "BYTES",
    }
    assert Preprocessor.from_dict(pre.to_dict()) == pre


def test_runs_from_before_kinds_were_kept_advertise_numbers_and_text() -> None:
    old = {"numeric": ["a"], "categorical": ["b"], "categories": {"b": ["x"]}}
    assert Preprocessor.from_dict(old).kinds == {"a": "float", "b": "text"}


def test_prediction_datatype_follows_the_labels() -> None:
    assert prediction_datatype(LabelInfo("binary", ["no", "yes"])) == "BYTES"
    assert prediction_datatype(LabelInfo("binary", [0, 1])) == "INT64"
    assert prediction_datatype(LabelInfo("binary", [False, True])) == "BOOL"
    assert prediction_datatype(LabelInfo("multiclass", [0.5, 1.5, 2])) == "FP64"
    assert prediction_datatype(LabelInfo("regression", [])) == "FP64"
    columns = ["prediction", "proba_no", "proba_yes"]
    assert [t.datatype for t in output_metadata(LabelInfo("binary", ["no", "yes"]), columns)] == [
        "BYTES",
        "FP64",
        "FP64",
    ]


def test_nulls_are_missing_values_and_the_frame_transforms_as_a_table_would() -> None:
    pre = _trained()
    frame = frame_from_inputs(pre, [*_request(), Tensor("extra", "FP64", [5], [1, 2, 3, 4, 5])])
    assert list(frame.columns) == pre.feature_names  # the extra input is ignored
    assert frame["count"].tolist()[0] == 7 and math.isnan(frame["count"].tolist()[1])
    assert frame["flag"].tolist()[0] == 1.0 and math.isnan(frame["flag"].tolist()[1])
    assert frame["colour"].tolist() == ["red", None]
    table = pd.DataFrame(
        {
            "count": [7, None],
            "ratio": [0.25, None],
            "flag": [True, None],
            "when": pd.to_datetime(["2024-01-15T10:00:00", None]),
            "colour": ["red", None],
        }
    )
    got, want = pre.transform(frame), pre.transform(table)
    np.testing.assert_array_equal(got.numeric, want.numeric)
    np.testing.assert_array_equal(got.categorical, want.categorical)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"ratio": Tensor("ratio", "FP64", [2], ["abc", 1.0])}, r"input 'ratio' \(FP64\): 'abc' is not a number"),
        (
            {"ratio": Tensor("ratio", "BYTES", [2], ["1", "2"])},
            r"input 'ratio': datatype BYTES where the model takes FP64",
        ),
        (
            {"colour": Tensor("colour", "INT64", [2], [1, 2])},
            r"input 'colour': datatype INT64 where the model takes BYTES",
        ),
        ({"colour": Tensor("colour", "BYTES", [2], [1, "red"])}, r"input 'colour' \(BYTES\): 1 is not text"),
        ({"count": Tensor("count", "INT64", [2], [True, 1])}, r"input 'count' \(INT64\): true is not a number"),
        ({"count": Tensor("count", "INT64", [3], [1, 2, 3])}, r"different lengths: 'count' has 3 rows, 'ratio' has 2"),
        ({"count": Tensor("count", "INT64", [3], [1, 2])}, r"input 'count': shape \[3\] says 3 rows but data holds 2"),
        ({"count": Tensor("count", "INT64", [1, 2], [1, 2])}, r"input 'count': shape \[1, 2\] is not one column"),
        ({"when": Tensor("when", "BYTES", [2], ["yesterday", None])}, r"input 'when' \(BYTES\): not a date and time"),
    ],
)
def test_bad_requests_name_their_input(override: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError, match=message):
        frame_from_inputs(_trained(), _request(**override))


def test_a_missing_input_is_named_with_its_datatype() -> None:
    request = [t for t in _request() if t.name != "ratio"]
    with pytest.raises(RequestError, match=r"input 'ratio' is missing; .* missing: ratio \(FP64\)"):
        frame_from_inputs(_trained(), request)


def test_an_empty_batch_is_an_empty_frame() -> None:
    frame = frame_from_inputs(_trained(), _request(0))
    assert len(frame) == 0 and list(frame.columns) == _trained().feature_names
