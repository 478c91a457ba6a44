"""Each config's share of a time limit (pure, on the Plan): the trainer's scheduler turns it into deadlines and
``tabjob plan`` shows it.

Configs run in plan order, and the order promises that a short budget still trains every family. With only the job's
deadline, one slow config (CatBoost with adaptive patience on a table of many classes runs past a thousand rounds) can
use the whole budget and leave the families after it nothing. So a config that starts before the last family's first
config may use at most an even share of the time left: the time left divided by the configs still to start up to and
including that last first config. A config that ends early leaves its share to the ones after it, so the shares only
bind when a config would have run long. The last family's first config has all the time left (its family's one turn).
After it, a config may use one turn's worth: the time left divided by the number of families, or by the configs still
to start where fewer remain. Without that, the first config after the turns (a CatBoost random config with adaptive
patience) could spend the rest of the budget alone, where the same time trains one config of every family
(BENCHMARKS.md, "one turn's worth after the turns"). Configs that form a round (rounds.py) take their shares together.
Within every config or round, a slot's fits (its folds, run one after another) split its time evenly, so the first
folds cannot run to the deadline and leave the last one skipped: a bag missing a fold has no out-of-fold prediction
for its rows and is dropped (TabM's folds on a 12,000-row table did exactly that, two of three cut at the deadline
after 130 s each), and none gets less than that even split as its slot started (the trainer's deadlines.py: a fold
predicts and saves past its share, and the next one once started with nothing left and trained one round). A fit
stopped by its share keeps its best round so far.
"""

from __future__ import annotations

from tabjob.contracts.plan import Plan


def configs_sharing(plan: Plan, order: int) -> int | None:
    """How many parts of the time left config ``order`` may use one of when it starts; None: it has it all.

    Pure. Before the last family's first config: the plan's configs from ``order`` up to and including that one.
    After it: the number of families, or the configs from ``order`` on where fewer remain.
    """
    if plan.time_limit_seconds is None:
        return None
    last_first = last_first_turn(plan)
    if last_first is None or order == last_first:
        return None
    if order > last_first:
        families = len({fit.key for fit in plan.fits})
        parts = min(families, len({fit.order for fit in plan.fits if fit.order >= order}))
        return parts if parts > 1 else None
    return len({fit.order for fit in plan.fits if order <= fit.order <= last_first})


def first_turns(plan: Plan) -> dict[str, int]:
    """Each family's first config's order, by family key (pure)."""
    first: dict[str, int] = {}
    for fit in plan.fits:
        first[fit.key] = min(first.get(fit.key, fit.order), fit.order)
    return first


def last_first_turn(plan: Plan) -> int | None:
    """The order of the last family's first config (pure): once it has run, every family has had its turn."""
    return max(first_turns(plan).values(), default=None)


def round_share(plan: Plan, orders: list[int]) -> float | None:
    """The fraction of the time left a round (rounds.py) may use when it starts; None: it has it all (pure).

    Its configs' shares taken together: as many parts as it has configs, of the parts its first config shares. A
    round ending with the last family's first config has all the time left, as that config has.
    """
    parts = [configs_sharing(plan, order) for order in orders]
    first = parts[0]
    if first is None or any(p is None for p in parts):
        return None
    return min(1.0, len(orders) / first)
