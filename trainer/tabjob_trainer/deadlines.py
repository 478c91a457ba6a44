"""The time a config and its folds may use, as deadlines: the planner's share of the time left (tabjob.planner's
time_share.py says which configs share and why) from the moment a config starts, and within a config each fold's
even share of its slot's time, so a bag is never left without its last fold.
"""

from __future__ import annotations


def share_deadline(now: float, deadline: float | None, parts: int | None) -> float | None:
    """The deadline of one of ``parts`` even shares of the time from ``now`` to ``deadline`` (pure)."""
    if deadline is None or parts is None or parts <= 1:
        return deadline
    return now + max(0.0, deadline - now) / parts
