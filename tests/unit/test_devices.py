"""Lightning's device forms (README.md, "The command line"): table-driven, plus properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabjob.cli.devices import DeviceError, parse_devices


@pytest.mark.parametrize(
    ("value", "visible", "expected"),
    [
        (3, 4, [0, 1, 2]),
        ("3", 4, [0, 1, 2]),
        ("3,", 4, [3]),
        ([1, 3], 4, [1, 3]),
        ("1, 3", 4, [1, 3]),
        (-1, 4, [0, 1, 2, 3]),
        ("-1", 2, [0, 1]),
        ("auto", 2, [0, 1]),
        ("auto", 0, []),
        ([0], 1, [0]),
        (" 2 ", 2, [0, 1]),
    ],
)
def test_forms(value: Any, visible: int, expected: list[int]) -> None:
    assert parse_devices(value, visible) == expected


@pytest.mark.parametrize(
    ("value", "visible", "says"),
    [
        (0, 4, "0 devices"),
        ("0", 4, "0 devices"),
        ([], 4, "empty list"),
        ([1, 1], 4, "duplicate"),
        ("1, 1", 4, "duplicate"),
        ("3,", 2, "not visible"),
        ([5], 4, "not visible"),
        (5, 4, "5 requested but 4 visible"),
        (-1, 0, "none is visible"),
        (-2, 4, ">= 1"),
        ("two", 4, "not a device id"),
        ("1,x", 4, "not a device id"),
        (True, 4, "expected a count"),
        (",", 4, "no device ids"),
    ],
)
def test_errors_say_what_is_wrong(value: Any, visible: int, says: str) -> None:
    with pytest.raises(DeviceError, match=says):
        parse_devices(value, visible)


@given(st.integers(1, 16), st.data())
def test_lists_round_trip(visible: int, data: st.DataObject) -> None:
    ids = data.draw(st.lists(st.integers(0, visible - 1), min_size=1, unique=True))
    assert parse_devices(ids, visible) == ids
    assert parse_devices(", ".join(map(str, ids)) + ("," if len(ids) == 1 else ""), visible) == ids


@given(st.integers(1, 16), st.data())
def test_counts_pick_the_first(visible: int, data: st.DataObject) -> None:
    n = data.draw(st.integers(1, visible))
    assert parse_devices(n, visible) == parse_devices(str(n), visible) == list(range(n))
