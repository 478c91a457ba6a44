"""Each config's share of a time limit, until every family has had its first turn.

Configs run in plan order, and the order promises that a short budget still trains every family. With only the
job's deadline, one slow config (CatBoost with adaptive patience on a table of many classes runs past a thousand
rounds) can use the whole budget and leave the families after it nothing. So a config that starts before the last
family's first config may use at most an even share of the time left: the time left divided by the configs still
to start up to and including that last first config. A config that ends early leaves its share to the ones after it,
so the shares only bind when a config would have run long. From the last family's first config on, a config has all
the time left. Within every config, a slot's fits (its folds, run one after another) split the config's time evenly,
so the first folds cannot run to the deadline and leave the last one skipped: a bag missing a fold has no out-of-fold
prediction for its rows and is dropped (TabM's folds on a 12,000-row table did exactly that, two of three cut at the
deadline after 130 s each). A fit stopped by its share keeps its best round so far.
"""

from __future__ import annotations

from tabjob.contracts.plan import Plan


def configs_sharing(plan: Plan, order: int) -> int | None:
    """How many configs share the time left when config ``order`` starts (its own included); None: it has it all.

    Pure: the plan's configs from ``order`` up to and including the last family's first config.
    """
    if plan.time_limit_seconds is None:
        return None
    first: dict[str, int] = {}
    for fit in plan.fits:
        first[fit.key] = min(first.get(fit.key, fit.order), fit.order)
    last_first = max(first.values(), default=order)
    if order >= last_first:
        return None
    return len({fit.order for fit in plan.fits if order <= fit.order <= last_first})


def share_deadline(now: float, deadline: float | None, parts: int | None) -> float | None:
    """The deadline of one of ``parts`` even shares of the time from ``now`` to ``deadline`` (pure)."""
    if deadline is None or parts is None or parts <= 1:
        return deadline
    return now + max(0.0, deadline - now) / parts
