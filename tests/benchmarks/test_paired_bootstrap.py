"""The peer benchmark's verdicts: a paired bootstrap of the test-score gap between two systems."""

from __future__ import annotations

import numpy as np

from bench.paired_bootstrap import paired_gap, score


def test_identical_predictions_tie_with_a_zero_interval() -> None:
    y = np.array(["a", "b", "a", "c"] * 25)
    gap = paired_gap("accuracy", y, (y.copy(), None), (y.copy(), None))
    assert (gap.mean, gap.low, gap.high, gap.verdict) == (0.0, 0.0, 0.0, "tie")


def test_a_system_right_on_many_more_rows_wins_and_the_other_loses() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=400)
    close, far = y + rng.normal(scale=0.1, size=400), y + rng.normal(scale=1.0, size=400)
    assert paired_gap("rmse", y, (close, None), (far, None)).verdict == "win"
    assert paired_gap("rmse", y, (far, None), (close, None)).verdict == "loss"


def test_one_row_apart_on_a_small_test_set_is_a_tie() -> None:
    y = np.array([1, 0] * 50)
    a = y.copy()
    b = y.copy()
    b[0] = 1 - b[0]  # wrong on one row of 100
    gap = paired_gap("accuracy", y, (a, None), (b, None))
    assert abs(gap.mean - 0.01) < 1e-12 and gap.verdict == "tie" and gap.low <= 0 <= gap.high


def test_auc_is_paired_on_the_probabilities_and_rmse_is_negated() -> None:
    y = np.array([0, 0, 1, 1] * 30)
    good, poor = np.where(y == 1, 0.9, 0.1), np.tile([0.4, 0.6, 0.5, 0.5], 30)
    gap = paired_gap("roc_auc", y, (y, good), (y, poor))
    assert gap.mean > 0.4 and gap.verdict == "win"
    assert score("rmse", np.array([0.0, 0.0]), np.array([3.0, 4.0]), None) == -np.sqrt(12.5)
