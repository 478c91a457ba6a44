"""spec.stacking in the plan: which jobs get a stack layer, what it may spend, and what is refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from tabjob.api import MAX_LEADERBOARD_ROWS, parse_manifest
from tabjob.api.errors import SpecError
from tabjob.cli.autogluon import convert
from tabjob.contracts.plan import Plan
from tabjob.planner import plan_job
from tabjob.planner.stacking import RESERVE_FRACTION


def _plan(**spec: Any) -> Plan:
    body = {"data": {"train": "sklearn://wine", "label": "target"}, "resources": {"cpus": 2}, **spec}
    return plan_job(parse_manifest({"apiVersion": "tabjob.dev/v1alpha1", "kind": "TabularJob",
                                    "metadata": {"name": "s"}, "spec": body}))  # fmt: skip


GBM: dict[str, list[dict[str, Any]]] = {"GBM": [{}]}


@pytest.mark.parametrize(
    ("case", "spec", "levels"),
    [
        ("best stacks", {"preset": "best"}, 1),
        ("high stacks", {"preset": "high"}, 1),
        ("a budget means best, which stacks", {"timeLimitSeconds": 300}, 1),
        ("medium does not bag, so it does not stack", {"preset": "medium"}, 0),
        ("best made unbagged by the manifest does not stack", {"preset": "best", "bagging": {"folds": 0}}, 0),
        ("written models without a preset: only what is written", {"models": GBM, "bagging": {"folds": 3}}, 0),
        ("written on", {"models": GBM, "bagging": {"folds": 3}, "stacking": {}}, 1),
        ("written off beats the preset", {"preset": "best", "stacking": {"levels": 0}}, 0),
    ],
)
def test_who_gets_a_stack_layer(case: str, spec: dict[str, Any], levels: int) -> None:
    p = _plan(**spec)
    assert (p.stacking.levels if p.stacking else 0) == levels, case


def test_the_stack_keeps_its_share_of_the_budget_and_the_manifests_settings() -> None:
    p = _plan(timeLimitSeconds=600, stacking={"holdoutFraction": 0.2, "baseModels": 4})
    assert p.stacking is not None
    assert p.stacking.reserve_seconds == pytest.approx(RESERVE_FRACTION * 600)
    assert (p.stacking.holdout_fraction, p.stacking.base_models) == (0.2, 4)
    no_budget = _plan(preset="best")
    assert no_budget.stacking is not None and no_budget.stacking.reserve_seconds == 0.0


def test_a_best_preset_leaves_the_stack_a_leaderboard_row() -> None:
    p = _plan(timeLimitSeconds=3600)
    assert p.stacking is not None and len(p.configs) + 2 == MAX_LEADERBOARD_ROWS


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"models": GBM, "stacking": {"levels": 1}}, "set bagging.folds to 2 or more, or levels to 0"),
        ({"models": GBM, "bagging": {"folds": 2}, "stacking": {"levels": 2}}, "must be at most 1, got 2"),
        (
            {"models": GBM, "bagging": {"folds": 2}, "stacking": {"holdoutFraction": 0.9}},
            "must be at most 0.5, got 0.9",
        ),
        (
            {
                "models": {"GBM": [{"name": f"g{i}"} for i in range(MAX_LEADERBOARD_ROWS - 1)]},
                "bagging": {"folds": 2},
                "stacking": {},
            },
            "the stack's row would make 65 leaderboard rows",
        ),
    ],
)
def test_a_stack_that_cannot_be_had_is_refused_naming_the_field(spec: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError) as info:
        _plan(**spec)
    assert "spec.stacking" in str(info.value) and says in str(info.value)


def test_a_preset_stack_without_room_is_dropped_with_a_warning_not_an_error() -> None:
    models = {"GBM": [{"name": f"g{i}"} for i in range(MAX_LEADERBOARD_ROWS - 1)]}
    p = _plan(preset="best", models=models)
    assert p.stacking is None and any("no stack layer" in w for w in p.warnings)


@pytest.mark.parametrize(
    ("fit", "stacking", "note"),
    [
        ({"num_stack_levels": 1}, {"levels": 1}, None),
        ({"num_stack_levels": 0}, {"levels": 0}, None),
        ({"num_stack_levels": 3}, {"levels": 1}, "tabjob stacks one layer"),
        ({"num_stack_levels": 1, "dynamic_stacking": False}, {"levels": 1}, "always guards its stack layer"),
        ({"num_stack_levels": "auto"}, None, "not a level count"),
        ({}, None, None),
    ],
)
def test_from_autogluon_carries_num_stack_levels(fit: dict[str, Any], stacking: Any, note: str | None) -> None:
    doc, notes = convert({"label": "y", "train_data": "t.csv", "num_cpus": 2, "num_bag_folds": 3, **fit})
    assert doc["spec"].get("stacking") == stacking
    assert (note is None) == all("stack" not in n for n in notes) and (note is None or any(note in n for n in notes))
    plan_job(parse_manifest(doc))  # what it writes plans
