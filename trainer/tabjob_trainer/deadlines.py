"""The time a config and its folds may use, as deadlines: the planner's share of the time left (tabjob.planner's
time_share.py says which configs share and why) from the moment a config starts, and within a config each fold's
even share of its slot's time, so a bag is never left without its last fold. A fold a resumed run reuses takes no
time, so it takes no share either.

A fold stopped at its share still predicts its validation and test rows and saves itself past it (seconds, for a
LightGBM fold of thousands of rounds). Splitting only what is left, the next fold could then start with next to
nothing and train a round or two: a fold that bad sinks its bag's out-of-fold score and a third of its test
predictions, and a refit takes the mean of its folds' rounds. So no fold gets less than the even share it had when
its slot started (``fold_deadline``); the config may end that much past its own share, never past the base models'
deadline.
"""

from __future__ import annotations


def share_deadline(now: float, deadline: float | None, parts: int | None) -> float | None:
    """The deadline of one of ``parts`` even shares of the time from ``now`` to ``deadline`` (pure)."""
    if deadline is None or parts is None or parts <= 1:
        return deadline
    return now + max(0.0, deadline - now) / parts


def fraction_deadline(now: float, deadline: float | None, fraction: float | None) -> float | None:
    """The deadline of ``fraction`` of the time from ``now`` to ``deadline`` (pure; None: all of it)."""
    if deadline is None or fraction is None or fraction >= 1:
        return deadline
    return now + max(0.0, deadline - now) * fraction


def fold_deadline(
    now: float, shared: float | None, parts: int | None, floor: float | None, limit: float | None
) -> float | None:
    """A fold's deadline (pure): its even share of its slot's time left (``shared``, the config's deadline, split
    over ``parts``), but at least ``floor`` seconds from ``now`` while that stays before ``limit`` (the base models'
    deadline)."""
    even = share_deadline(now, shared, parts)
    if even is None or floor is None:
        return even
    guaranteed = now + floor if limit is None else min(now + floor, limit)
    return max(even, guaranteed)


def folds_left(fit_ids: list[str], reused: set[str]) -> dict[str, int]:
    """For each fit of a slot that will train, how many of the slot's fits still to train (itself included) split
    the time left when it starts (pure); the ``reused`` ones, whose stored results a resumed run takes, count none."""
    training = [fit_id for fit_id in fit_ids if fit_id not in reused]
    return {fit_id: len(training) - i for i, fit_id in enumerate(training)}
