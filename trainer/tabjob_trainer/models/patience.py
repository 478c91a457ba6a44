"""Early stopping for the boosted trees whose patience grows with the best round so far, as AutoGluon's trees stop.

A model still improving at round 2,000 deserves more rounds to improve again than one that peaked at round 30: with
``adaptive_patience`` > 0 a fit waits ``round(adaptive_patience x best round) + 20`` rounds after its best, and never
fewer than ``early_stopping_rounds`` (scaled down in proportion above 10,000 training rows, where each round moves
the score more, and never under 20). ``adaptive_patience: 0`` waits exactly ``early_stopping_rounds``, the fixed
patience of LightGBM's, XGBoost's and CatBoost's own early stopping; ``early_stopping_rounds: 0`` trains every round.

One pure tracker serves the three libraries' callbacks, so they stop by one rule; the deadline's stop keeps the best
round the tracker saw, not the round the clock ran out on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tabjob_trainer.models.base import FitContext

OFFSET = 20  # the patience at round 0, and the least the row scaling leaves
FULL_ROWS = 10_000  # above this many training rows the least patience shrinks in proportion


def least_patience(rounds: int, rows: int) -> int:
    """The patience before any improvement: ``rounds`` up to 10,000 training rows, in proportion fewer above."""
    return max(min(rounds, OFFSET), round(rounds * min(1.0, FULL_ROWS / max(rows, 1))))


def patience(best_round: int, least: int, rate: float) -> int:
    """Rounds to wait after ``best_round`` before stopping."""
    return max(least, round(rate * best_round) + OFFSET) if rate > 0 else least


@dataclass
class Stopper:
    """The best validation score so far and when to give up on beating it; ``update`` once a round."""

    least: int
    rate: float
    best_round: int = -1
    best_score: float = math.nan

    def update(self, round_: int, value: float, higher_is_better: bool) -> bool:
        """Records this round's validation score; True once the patience since the best round has run out."""
        if self.best_round < 0 or (value > self.best_score if higher_is_better else value < self.best_score):
            self.best_round, self.best_score = round_, value
            return False
        return round_ - self.best_round >= patience(self.best_round, self.least, self.rate)


def fit_rows(ctx: FitContext, local_rows: int) -> int:
    """The fit's training rows, the same on every rank, so that their patience agrees and no rank stops alone: a
    sharded fit's ranks sum their shards; otherwise every rank holds every row (before taking its slice)."""
    if not (ctx.sharded and ctx.distributed):
        return local_rows
    from tabjob_trainer.sharded.collective import group_sum

    return int(group_sum(ctx)(np.array([float(local_rows)]))[0])


def stopper(hyperparameters: dict[str, Any], rows: int, at_least: int = 0) -> Stopper | None:
    """The tracker a fit's config asks for (None: train every round); ``at_least`` raises the least patience (a
    metric that moves in steps needs more)."""
    rounds = int(hyperparameters["early_stopping_rounds"])
    if rounds <= 0:
        return None
    rate = float(hyperparameters["adaptive_patience"])
    rounds = max(rounds, at_least)
    return Stopper(least=least_patience(rounds, rows) if rate > 0 else rounds, rate=rate)


def deadline_check(ctx: FitContext) -> Callable[[], bool] | None:
    """Whether the fit's deadline has passed, for the trees' callbacks to ask once a round (None: no deadline). A fit
    over several ranks asks all of them, so they stop on the same round (sharded.collective.any_rank_past)."""
    deadline = ctx.deadline
    if deadline is None:
        return None
    if ctx.distributed:
        from tabjob_trainer.sharded.collective import any_rank_past

        return any_rank_past(ctx, deadline)
    return lambda: time.time() >= deadline
