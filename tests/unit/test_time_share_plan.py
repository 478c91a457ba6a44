"""Each config's share of a time limit (tabjob.planner.time_share): pure, on the Plan, the same for the trainer's
deadlines and `tabjob plan`'s column."""

from __future__ import annotations

from typing import Any

from tabjob.api import parse_manifest
from tabjob.contracts.plan import Plan
from tabjob.planner import plan_job
from tabjob.planner.time_share import configs_sharing


def _plan(models: dict[str, Any] | None = None, **spec: Any) -> Plan:
    doc: dict[str, Any] = {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": "share"},
        "spec": {"data": {"train": "/data/train.csv", "label": "label"}, "resources": {"cpus": 2}, **spec},
    }
    if models is not None:
        doc["spec"]["models"] = models
    return plan_job(parse_manifest(doc))


def _first_orders(plan: Plan) -> dict[str, int]:
    first: dict[str, int] = {}
    for fit in plan.fits:
        first.setdefault(fit.key, fit.order)
    return first


def test_configs_before_the_last_family_s_first_turn_share_the_time_left() -> None:
    plan = _plan(preset="best", timeLimitSeconds=300)
    first = _first_orders(plan)
    last_first = max(first.values())
    assert last_first == first["TABM"] and last_first > first["CAT"], first  # on CPUs TABM joins the turns late
    # Each config before it shares the time left with the configs up to and including it; it has all of it.
    for order in range(last_first):
        assert configs_sharing(plan, order) == last_first - order + 1
    assert configs_sharing(plan, last_first) is None


def test_configs_after_the_turns_get_one_turn_s_worth_of_the_time_left() -> None:
    plan = _plan(preset="best", timeLimitSeconds=300)
    first = _first_orders(plan)
    families = len(first)
    orders = sorted({f.order for f in plan.fits})
    after = [order for order in orders if order > max(first.values())]
    assert len(after) > families, after  # the portfolio and the random configs go on well past one turn
    # A turn's worth while a turn's configs remain, then the configs left; the very last config has it all.
    for order in after:
        expected = min(families, len([o for o in orders if o >= order]))
        assert configs_sharing(plan, order) == (expected if expected > 1 else None), order
    assert configs_sharing(plan, after[0]) == families
    assert configs_sharing(plan, after[-1]) is None


def test_no_time_limit_no_share_and_one_family_no_share() -> None:
    untimed = _plan(preset="best")
    assert all(configs_sharing(untimed, f.order) is None for f in untimed.fits)
    one_family = _plan({"GBM": [{}, {"name": "B"}]}, timeLimitSeconds=60)
    assert {configs_sharing(one_family, f.order) for f in one_family.fits} == {None}
