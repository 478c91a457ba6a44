"""The time a config and its folds may use, as deadlines: the planner's share of the time left (tabjob.planner's
time_share.py says which configs share and why) from the moment a config starts, and within a config each fold's
even share of its slot's time, so a bag is never left without its last fold. A fold a resumed run reuses takes no
time, so it takes no share either.
"""

from __future__ import annotations


def share_deadline(now: float, deadline: float | None, parts: int | None) -> float | None:
    """The deadline of one of ``parts`` even shares of the time from ``now`` to ``deadline`` (pure)."""
    if deadline is None or parts is None or parts <= 1:
        return deadline
    return now + max(0.0, deadline - now) / parts


def folds_left(fit_ids: list[str], reused: set[str]) -> dict[str, int]:
    """For each fit of a slot that will train, how many of the slot's fits still to train (itself included) split
    the time left when it starts (pure); the ``reused`` ones, whose stored results a resumed run takes, count none."""
    training = [fit_id for fit_id in fit_ids if fit_id not in reused]
    return {fit_id: len(training) - i for i, fit_id in enumerate(training)}
