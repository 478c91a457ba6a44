"""Rounds of configs (tabjob.planner.rounds): which configs the ranks run without waiting for each other between
them, and where each config's deal over the slots starts. Table-driven on configs, then on real plans."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tabjob.api import parse_manifest
from tabjob.contracts.plan import Amount, ConfigPlan, Plan
from tabjob.planner import plan_job
from tabjob.planner.rounds import first_slots, rounds
from tabjob.planner.time_share import round_share


def _config(order: int, key: str, fits: int = 3, slots: int = 2, **over: Any) -> ConfigPlan:
    values: dict[str, Any] = {
        "name": f"{key}_{order}",
        "key": key,
        "order": order,
        "field": f"spec.models.{key}[0]",
        "cpus": 1,
        "gpus": 0.0,
        "processes": 1,
        "trials_parallel": 1,
        "folds_parallel": slots,
        "slots": slots,
        "fits": fits,
        "peak": Amount(cpus=slots, gpus=0),
    }
    return ConfigPlan(**{**values, **over})


# Each row: the configs in order (family key and what differs), the rounds, each config's first slot.
CASES: list[tuple[str, list[ConfigPlan], list[list[int]], list[int]]] = [
    (
        "3 folds on 2 slots pair up, the last family's first config closing its round",
        [_config(0, "GBM"), _config(1, "CAT"), _config(2, "XGB"), _config(3, "GBM"), _config(4, "CAT")],
        [[0, 1], [2], [3, 4]],
        [0, 1, 0, 0, 1],
    ),
    (
        "the last family's first config opening a round runs alone",
        [_config(0, "GBM", fits=4), _config(1, "CAT"), _config(2, "GBM"), _config(3, "CAT")],
        [[0], [1], [2, 3]],
        [0, 0, 0, 1],
    ),
    (
        "folds that fill the slots need no partner",
        [_config(0, "GBM", fits=4), _config(1, "CAT", fits=4), _config(2, "GBM", fits=4)],
        [[0], [1], [2]],
        [0, 0, 0],
    ),
    (
        "5 folds on 4 slots: four configs until each slot holds five",
        [_config(i, "GBM", fits=5, slots=4) for i in range(5)],  # one family: its first config closes at once
        [[0], [1, 2, 3, 4]],
        [0, 0, 1, 2, 3],
    ),
    (
        "another shape never joins",
        [_config(0, "GBM"), _config(1, "GBM", cpus=2), _config(2, "GBM"), _config(3, "GBM")],
        [[0], [1], [2, 3]],
        [0, 0, 0, 1],
    ),
    (
        "data-parallel fits and trials side by side run alone",
        [
            _config(0, "NN_TORCH", processes=2),
            _config(1, "GBM", trials_parallel=2, slots=4),
            _config(2, "GBM"),
            _config(3, "GBM"),
        ],
        [[0], [1], [2, 3]],
        [0, 0, 0, 1],
    ),
    (
        "one slot: nothing to balance",
        [_config(0, "GBM", slots=1), _config(1, "CAT", slots=1)],
        [[0], [1]],
        [0, 0],
    ),
]


@pytest.mark.parametrize(("configs", "expected", "first"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rounds(configs: list[ConfigPlan], expected: list[list[int]], first: list[int]) -> None:
    assert rounds(configs) == expected
    assert first_slots(configs) == dict(enumerate(first))


def _plan(**spec: Any) -> Plan:
    doc: dict[str, Any] = {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": "rounds"},
        "spec": {"data": {"train": "/data/train.csv", "label": "label"}, "resources": {"cpus": 2}, **spec},
    }
    return plan_job(parse_manifest(doc))


def test_the_best_preset_with_three_folds_on_two_cpus_pairs_its_configs() -> None:
    plan = _plan(preset="best", bagging={"folds": 3}, timeLimitSeconds=300)
    found = rounds(plan.configs)
    assert [o for r in found for o in r] == [c.order for c in plan.configs]  # each config once, in order
    assert all(len(r) == 2 for r in found[:-1]) and len(found[-1]) in (1, 2), found
    for orders in found:
        load = Counter(f.slot for f in plan.fits if f.order in orders)
        if len(orders) == 2:
            assert load == {0: 3, 1: 3}, (orders, load)


def test_a_round_s_share_is_its_configs_shares_together() -> None:
    plan = _plan(preset="best", bagging={"folds": 3}, timeLimitSeconds=300)
    found = rounds(plan.configs)
    tabm = next(c.order for c in plan.configs if c.key == "TABM")
    closing = next(r for r in found if tabm in r)
    assert closing[-1] == tabm and round_share(plan, closing) is None  # with the last first turn: all the time left
    assert round_share(plan, found[0]) == pytest.approx(2 / (tabm + 1))  # two of the parts up to that config
    after = found[found.index(closing) + 1]
    assert round_share(plan, after) == pytest.approx(2 / 5)  # a turn's worth each, five families
    untimed = _plan(preset="best", bagging={"folds": 3})
    assert {round_share(untimed, r) for r in rounds(untimed.configs)} == {None}


def test_trials_one_at_a_time_are_one_deal() -> None:
    # Two trials of 3 folds on 2 slots: dealt as one, each slot holds three (each trial dealt afresh gave 4 and 2).
    plan = _plan(models={"GBM": [{}]}, bagging={"folds": 3}, tuning={"trials": 2})
    assert Counter(f.slot for f in plan.fits) == {0: 3, 1: 3}
