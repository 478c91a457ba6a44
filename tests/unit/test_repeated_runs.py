"""bench/repeated_runs.py: runs of one code read together count a table by the mean of its runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import repeated_runs


def _entry(tabjob: float, peer: float, floor: float, verdict: str = "tie") -> dict[str, Any]:
    return {
        "metric": "accuracy",
        "tabjob": {"test": tabjob},
        "autogluon": {"test": peer},
        "default_lightgbm_test": floor,
        "score_met": tabjob >= peer,
        "not_below_default_lightgbm": tabjob >= floor,
        "bootstrap": {"verdict": verdict},
    }


def _write(results: Path, name: str, tables: dict[str, dict[str, Any]]) -> None:
    (results / f"{name}.json").write_text(json.dumps({"datasets": tables}))


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(repeated_runs, "RESULTS", tmp_path)
    return tmp_path


def test_a_table_counts_by_the_mean_of_its_runs(results: Path) -> None:
    # a: one run below the peer, one above, the mean above; b: the mean below the peer and the floor.
    _write(results, "one", {"a": _entry(0.78, 0.80, 0.70), "b": _entry(0.60, 0.61, 0.59)})
    _write(results, "two", {"a": _entry(0.84, 0.80, 0.70), "b": _entry(0.57, 0.61, 0.59, "loss")})
    lines = repeated_runs.section("t", (("one",), ("two",)))
    text = "\n".join(lines)
    assert "| a | accuracy | 0.7800, 0.8400 | 0.8100 | 0.8000 | 0.7000 | 1 of 2 | yes | yes | tie, tie |" in text
    assert "| b | accuracy | 0.6000, 0.5700 | 0.5850 | 0.6100 | 0.5900 | 0 of 2 | **no** | **no** | tie, loss |" in text
    assert "at or above AutoGluon on **1 of 2**, at or above the default LightGBM on **1 of 2**" in text
    assert "a loss by the bootstrap in any run on **1 of 2**" in text
    assert "`one` 0 and 2 of 2; `two` 1 and 1 of 2" in text


def test_a_run_in_two_files_counts_as_one_and_a_partial_run_has_no_count_of_its_own(results: Path) -> None:
    _write(results, "first_a", {"a": _entry(0.9, 0.8, 0.7)})
    _write(results, "first_b", {"b": _entry(0.9, 0.8, 0.7)})
    _write(results, "again", {"a": _entry(0.7, 0.8, 0.7)})
    text = "\n".join(repeated_runs.section("t", (("first_a", "first_b"), ("again",))))
    assert "`first_a` + `first_b` 2 and 2 of 2." in text
    assert "`again`" in text.split("Each run's own counts")[0]  # named among the runs read
    assert "`again` 0" not in text  # it left b out, so it has no counts of its own


def test_runs_scored_against_different_peers_are_refused(results: Path) -> None:
    _write(results, "one", {"a": _entry(0.8, 0.80, 0.7)})
    _write(results, "two", {"a": _entry(0.8, 0.81, 0.7)})
    with pytest.raises(ValueError, match="different AutoGluon runs"):
        repeated_runs.section("t", (("one",), ("two",)))


def test_nothing_measured_says_so(results: Path) -> None:
    assert "Not measured yet." in repeated_runs.section("t", (("none",),))
