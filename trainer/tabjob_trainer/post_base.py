"""The time kept after the base models, sized from the run's own fits.

The stack layer and the refit start once every base model is done, so with ``timeLimitSeconds`` the base models stop
early enough to leave them time: the plan keeps them a fixed share (``plan.stacking.reserve_seconds`` and
``plan.refit.reserve_seconds``, a quarter of the limit together). Most runs used a fraction of it and left the rest
unused at the end, while their base models had stopped at their deadline. Once the tree families have had their first
turn, the fits so far say what those steps cost, so after each config (each round, scheduler.py) rank 0 estimates
what they would need if the base models ended then and the base models' deadline moves to leave that, never more than
the plan's share:

- the refit trains each member of the deployed ensemble twice (without the guard's holdout, and on every row), best
  weighted first while the time allows: estimated as the best bag (by its folds' validation score) of each tree
  family and LightGBM's defaults (the floor), each from its own folds (``refit.refit_seconds``);
- the stack trains two bags of LightGBM's default config (the guard's, on the rows it keeps, and the one on every
  row): estimated from that config's own bag;
- both times ``SAFETY``, plus ``MARGIN_FRACTION`` of the limit for the ensemble, the guards' predictions and writing
  the results.

An estimate that falls short costs members of the refit (they stay bags, best weighted first) or the stack (skipped
with the reason), never the run: the refit and the stack check their own time. The estimate is read once every
config it reads from has had its turn (``sized_after``): the first config of each tree family, the floor and the
stack's LightGBM. The networks come after those in every preset, and TabM, the last family's first config, runs to
the base models' deadline on most tables: sized only after it (as it was), it always ran under the plan's whole
share. Until then, or with a sharded table (whose refit is not rank 0's alone), the plan's share stands.
"""

from __future__ import annotations

import numpy as np

from tabjob import families
from tabjob.contracts.plan import Plan
from tabjob.planner.time_share import first_turns
from tabjob_trainer.bagging import BaggedModel, expected_fits, group_fits
from tabjob_trainer.record import FitRecord
from tabjob_trainer.refit import FLOOR, refit_seconds
from tabjob_trainer.stacking import STACKER

SAFETY = 1.5  # the estimates read fold times taken beside other work, on two thirds of the rows
MARGIN_FRACTION = 0.05  # of timeLimitSeconds: the ensemble, the guards' predictions, oof/ and the leaderboard


def plan_reserve(plan: Plan) -> float:
    """Seconds the plan keeps after the base models: the stack's share and the refit's."""
    return (plan.stacking.reserve_seconds if plan.stacking else 0.0) + (
        plan.refit.reserve_seconds if plan.refit else 0.0
    )


def sized_after(plan: Plan) -> int | None:
    """The order of the config after which the fits say what the stack and the refit need (pure): the last of the
    tree families' first configs, the floor's and the stack's LightGBM; None where the plan has none of them (the
    estimate then has nothing to read, and the plan's share stands)."""
    trees = [order for key, order in first_turns(plan).items() if families.family(key).refit_replaces_bag]
    read = trees + [fit.order for fit in plan.fits if fit.model in (FLOOR, STACKER)]
    return max(read, default=None)


def finished_bags(plan: Plan, records: list[FitRecord]) -> list[BaggedModel]:
    """The configs whose every planned fit succeeded, as bags of their records (no predictions: pure)."""
    expected = expected_fits(plan)
    bags = []
    for key, fits in group_fits([r for r in records if r.succeeded]).items():
        if len(fits) == expected.get(key, -1):
            first = fits[0]
            bags.append(BaggedModel(first.model, first.model, first.key, first.order, first.trial, fits))
    return bags


def _mean_score(bag: BaggedModel) -> float:
    scores = [f.score_val for f in bag.fits if f.score_val is not None]
    return float(np.mean(scores)) if scores else float("-inf")


def refit_need(plan: Plan, bags: list[BaggedModel], rows: int) -> float:
    """Seconds the refit would take (pure): the best bag of each tree family and the floor, twice each."""
    if plan.refit is None:
        return 0.0
    held = round(rows * (1 - plan.refit.holdout_fraction))
    best: dict[str, BaggedModel] = {}
    for bag in bags:
        facts = families.FAMILIES.get(bag.key)
        if facts is None or not facts.refit_replaces_bag:
            continue
        if bag.key not in best or _mean_score(bag) > _mean_score(best[bag.key]):
            best[bag.key] = bag
    members = list(best.values()) + [b for b in bags if b.config == FLOOR and b not in best.values()]
    return sum(refit_seconds(b, rows) + refit_seconds(b, held) for b in members)


def stack_need(plan: Plan, bags: list[BaggedModel]) -> float | None:
    """Seconds the stack would take (pure), or None where LightGBM's default config has not finished yet."""
    if plan.stacking is None:
        return 0.0
    default = next((b for b in bags if b.config == STACKER), None)
    if default is None:
        return None
    return (2 - plan.stacking.holdout_fraction) * default.fit_time


def reserve_seconds(plan: Plan, records: list[FitRecord], rows: int) -> float:
    """Seconds to keep after the base models if they ended now (pure): the estimate, at most the plan's share."""
    limit = plan_reserve(plan)
    if plan.time_limit_seconds is None or limit <= 0:
        return limit
    bags = finished_bags(plan, records)
    stack = stack_need(plan, bags)
    if stack is None:
        return limit
    need = SAFETY * (refit_need(plan, bags, rows) + stack) + MARGIN_FRACTION * plan.time_limit_seconds
    return min(limit, need)


def refit_reserve(plan: Plan, records: list[FitRecord], rows: int) -> float:
    """Seconds the stack leaves the refit (pure): the refit's estimate, at most its share of the plan."""
    if plan.refit is None or plan.time_limit_seconds is None:
        return 0.0
    need = SAFETY * refit_need(plan, finished_bags(plan, records), rows) + MARGIN_FRACTION * plan.time_limit_seconds
    return min(plan.refit.reserve_seconds, need)
