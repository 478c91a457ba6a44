"""bench/rank_busy.py: each rank's busy share of the base models' span, from the event log alone."""

from __future__ import annotations

import pytest

from bench.rank_busy import busy
from tabjob.contracts.results import FitEvent


def _fit(rank: int, fit: str, start: float, end: float) -> list[FitEvent]:
    return [
        FitEvent(event="FitStarted", rank=rank, fit=fit, t=start),
        FitEvent(event="FitEnded", rank=rank, fit=fit, t=end, state="Succeeded"),
    ]


@pytest.mark.parametrize(
    ("fits", "span", "shares", "idle"),
    [
        # three folds on two ranks: rank 1 waits while rank 0 trains its second fold
        ([(0, "A.f0", 0, 10), (1, "A.f1", 0, 10), (0, "A.f2", 10, 20)], 20.0, {"0": 1.0, "1": 0.5}, 10.0),
        # two configs of two folds each: nobody waits
        ([(0, "A.f0", 0, 5), (1, "A.f1", 0, 5), (0, "B.f0", 5, 9), (1, "B.f1", 5, 9)], 9.0, {"0": 1.0, "1": 1.0}, 0.0),
        # two configs of three folds in one round: three fits on each rank, nobody waits
        (
            [
                *[(0, "A.f0", 0, 3), (0, "A.f2", 3, 6), (0, "B.f1", 6, 9)],
                *[(1, "A.f1", 0, 3), (1, "B.f0", 3, 6), (1, "B.f2", 6, 9)],
            ],
            9.0,
            {"0": 1.0, "1": 1.0},
            0.0,
        ),
        # a fit skipped before it started has no FitStarted and counts for nothing
        ([(0, "A.f0", 0, 4), (1, "A.f1", 0, 2)], 4.0, {"0": 1.0, "1": 0.5}, 2.0),
    ],
)
def test_busy_shares_and_idle_cpu_seconds(
    fits: list[tuple[int, str, float, float]], span: float, shares: dict[str, float], idle: float
) -> None:
    events = [FitEvent(event="JobStarted", rank=0, t=0.0)]
    for fit in fits:
        events += _fit(*fit)
    events.append(FitEvent(event="FitEnded", rank=1, fit="C.f1", t=99.0, state="Skipped"))
    got = busy(events)
    assert got == {"span_seconds": span, "busy_share": shares, "idle_cpu_seconds": idle}
