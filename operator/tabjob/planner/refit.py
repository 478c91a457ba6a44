"""The refit's plan (spec.refitFull, or the preset's): whether the deployed model is trained again on every row.

A bagged model's fold models each learn from (k-1)/k of the rows and stop on a proxy of the eval metric on the rest;
on a few thousand rows that can cost more than the bag's averaging gains (BENCHMARKS.md, "The floor and the refit").
A refit trains each of the deployed model's members once more on every row, with the mean of its folds' best
iteration counts, and a holdout of the training rows decides between the refits and the bags. It runs on rank 0 once
the base models and the stack are done, so with ``timeLimitSeconds`` it is kept a share of the budget, and its rows
(one per refit model, the ensemble's included) need room on the leaderboard.
"""

from __future__ import annotations

from tabjob.api import MAX_LEADERBOARD_ROWS, TabularJobSpec
from tabjob.api.errors import SpecError
from tabjob.contracts.plan import RefitPlan
from tabjob.planner.limits import leaderboard_rows

# The most of timeLimitSeconds the base models leave to the refit: it trains each refit member twice (once without
# the guard's holdout, once on every row), about two fold fits' time per member. The trainer keeps less where the
# fits so far say it needs less (its post_base.py).
RESERVE_FRACTION = 0.15
HOLDOUT_FRACTION = 0.2  # of the training rows: the guard's verdict on fewer rows is mostly noise
ROWS = 9  # leaderboard rows a preset leaves free for the refit: eight refit members and the ensemble's


def wanted(written: bool | None, folds: int, preset_refits: bool) -> bool:
    """What the manifest writes, or the preset's (on, when it refits and the models are bagged)."""
    if written is not None:
        return written
    return preset_refits and folds >= 2


def refit_plan(spec: TabularJobSpec, preset_refits: bool, stacked: bool) -> tuple[RefitPlan | None, list[str]]:
    """(the refit's plan or None, warnings) for a spec whose preset has been resolved."""
    if not wanted(spec.refit_full, spec.bagging.folds, preset_refits):
        return None, []
    written = spec.refit_full is not None
    if spec.bagging.folds < 2:
        raise SpecError.at(
            "spec.refitFull",
            "true refits bagged models with their folds' iteration counts: set bagging.folds to 2 or more, or "
            "refitFull to false",
        )
    room = MAX_LEADERBOARD_ROWS - leaderboard_rows(spec) - (1 if stacked else 0)
    if room < 1:
        why = f"the leaderboard's {MAX_LEADERBOARD_ROWS} rows are all taken by the models"
        if written:
            raise SpecError.at("spec.refitFull", f"{why}; use fewer configs or trials, or refitFull: false")
        return None, [f"no refit on every row: {why}"]
    reserve = RESERVE_FRACTION * spec.time_limit_seconds if spec.time_limit_seconds else 0.0
    return RefitPlan(holdout_fraction=HOLDOUT_FRACTION, max_models=room, reserve_seconds=round(reserve, 1)), []
