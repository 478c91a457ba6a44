"""Presets: what a manifest leaves out (models, bagging) filled from the families' portfolios, in priority order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tabjob.api import MAX_FITS, MAX_LEADERBOARD_ROWS, parse_manifest
from tabjob.api.errors import SpecError
from tabjob.contracts.plan import Plan
from tabjob.families import FAMILIES as ALL_FAMILIES
from tabjob.planner import plan_job
from tabjob.planner.refit import ROWS as REFIT_ROWS
from tabjob.planner.search_space import DEFAULT_SPACES

# The families presets train (ModelFamily.in_presets: a new family joins once measured against the others).
FAMILIES = {key: f for key, f in ALL_FAMILIES.items() if f.in_presets}


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": "p"},
        "spec": {"data": {"train": "sklearn://wine", "label": "target"}, "resources": {"cpus": 2}, **spec},
    }


def _plan(**spec: Any) -> Plan:
    return plan_job(parse_manifest(_job(**spec)))


FIRSTS = ["GBM", "CAT", "XGB", "NN_TORCH", "TABM"]  # every family's first portfolio config, in the families' order
SECONDS = ["GBM_XT", "CAT_r177", "XGB_r33", "NN_TORCH_r79"]
# Without GPUs, TabM (costly on CPUs) joins after the trees' second configs; with one it takes its first turn.
CPU_ORDER = ["GBM_Plain", *FIRSTS[:-1], *SECONDS, "TABM"]
GPU = {"cpus": 2, "gpus": 1}


@pytest.mark.parametrize(
    ("case", "spec", "preset", "folds", "first_configs"),
    [
        ("no models, no budget: medium", {}, "medium", 0, ["GBM_Plain", *FIRSTS]),
        ("no models, a budget: best", {"timeLimitSeconds": 600}, "best", 8, CPU_ORDER),
        ("a GPU job: TabM in the first turn", {"timeLimitSeconds": 600, "resources": GPU}, "best", 8,
         ["GBM_Plain", *FIRSTS, *SECONDS]),
        ("high", {"preset": "high"}, "high", 5, CPU_ORDER),
        ("best without a budget", {"preset": "best"}, "best", 8, CPU_ORDER),
        ("medium with a budget", {"preset": "medium", "timeLimitSeconds": 60}, "medium", 0, ["GBM_Plain", *FIRSTS]),
        ("written bagging wins", {"preset": "best", "bagging": {"folds": 3}}, "best", 3, CPU_ORDER),
    ],
)  # fmt: skip
def test_a_preset_fills_models_and_bagging_in_priority_order(
    case: str, spec: dict[str, Any], preset: str, folds: int, first_configs: list[str]
) -> None:
    p = _plan(**spec)
    assert p.preset == preset and p.folds == folds, case
    names = [c.name for c in p.configs]
    assert names[: len(first_configs)] == first_configs, case
    assert [c.order for c in p.configs] == list(range(len(names)))  # the run order is the priority
    assert {c.key for c in p.configs} == set(FAMILIES)  # every family trains, even on the smallest preset


def test_medium_and_high_train_a_prefix_of_each_portfolio_and_best_all_of_it() -> None:
    sizes = {key: len(f.portfolio) for key, f in FAMILIES.items()}
    for preset, per_family in (("medium", 1), ("high", 2), ("best", None)):
        counts = {key: 0 for key in FAMILIES}
        for c in _plan(preset=preset).configs:
            counts[c.key] += 1
        counts["GBM"] -= 1  # the floor, GBM_Plain, on top of the portfolio
        assert counts == {k: min(n, per_family or n) for k, n in sizes.items()}, preset


def test_best_with_a_budget_keeps_going_with_seeded_random_configs_within_each_space() -> None:
    first, again = _plan(timeLimitSeconds=600), _plan(timeLimitSeconds=600)
    assert first == again  # seeded: the same plan on every machine, so operator, CLI and trainer agree
    randoms = [c for c in first.configs if "_rand" in c.name]
    assert randoms and all(c.order > max(o.order for o in first.configs if "_rand" not in o.name) for c in randoms)
    params = {f.model: f.hyperparameters for f in first.fits}
    for c in randoms:
        space = DEFAULT_SPACES[c.key]
        assert set(params[c.name]) == set(space) | set(FAMILIES[c.key].defaults)
        for name, value in ((n, v) for n, v in params[c.name].items() if n in space):
            dim = space[name]
            bounds = dim.int_ or dim.uniform or dim.log_uniform
            assert (value in (dim.choice or [])) if bounds is None else bounds[0] <= value <= bounds[1]


def test_best_with_a_budget_fills_the_leaderboard_so_the_budget_not_the_list_ends_the_run() -> None:
    p = _plan(timeLimitSeconds=3600)
    assert p.refit is not None and p.refit.max_models == REFIT_ROWS  # best refits the deployed model
    # Every row but the ensemble's, the stack's and those the refits of the deployed model take.
    assert len(p.configs) + 2 + REFIT_ROWS == MAX_LEADERBOARD_ROWS
    assert _plan(timeLimitSeconds=3600, refitFull=False).refit is None
    randoms = {key: sum(1 for c in p.configs if c.key == key and "_rand" in c.name) for key in FAMILIES}
    assert max(randoms.values()) - min(randoms.values()) <= 1  # the families take turns
    assert len(_plan(preset="best").configs) < MAX_LEADERBOARD_ROWS - 1  # no budget: the portfolio alone


@pytest.mark.parametrize("trials", [1, 3, 20])
@pytest.mark.parametrize("sets", [1, 4])
def test_a_preset_stays_within_the_leaderboard_and_the_fit_limit(trials: int, sets: int) -> None:
    p = _plan(timeLimitSeconds=600, tuning={"trials": trials}, bagging={"folds": 8, "sets": sets})
    assert len(p.configs) * trials + 1 <= MAX_LEADERBOARD_ROWS
    assert len(p.fits) <= MAX_FITS
    assert p.configs[0].name == "GBM_Plain"


def test_written_models_are_kept_and_the_preset_only_fills_bagging() -> None:
    p = _plan(preset="best", models={"GBM": [{}]})
    assert [c.name for c in p.configs] == ["GBM"] and p.folds == 8
    manual = _plan(models={"GBM": [{}]})
    assert manual.preset is None and manual.folds == 0  # no preset named, models written: nothing is filled


def test_an_empty_models_section_is_refused_by_name() -> None:
    with pytest.raises(SpecError) as info:
        parse_manifest(_job(models={}))
    assert "leave models out to train the preset's portfolio" in str(info.value)


def test_an_unknown_preset_is_refused_with_the_valid_ones() -> None:
    with pytest.raises(SpecError) as info:
        parse_manifest(_job(preset="extreme"))
    assert "spec.preset" in str(info.value) and "'medium', 'high' or 'best'" in str(info.value)


def test_a_spec_written_back_still_means_the_presets() -> None:
    """spec.json and the plan ConfigMap carry the spec as written: the filled fields stay out, so a trainer (or a
    user re-applying it) plans the same preset, not a frozen copy of it."""
    job = parse_manifest(_job(timeLimitSeconds=600))
    dumped = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert "models" not in dumped["spec"] and "bagging" not in dumped["spec"]
    assert plan_job(parse_manifest(json.loads(json.dumps(dumped)))) == plan_job(job)


def test_refit_full_needs_bagging_and_presets_turn_it_on_only_when_bagged() -> None:
    from tabjob.api.errors import SpecError

    assert _plan(preset="medium").refit is None  # no bagging: nothing to refit
    assert _plan(preset="high").refit is not None
    assert _plan(preset="best", bagging={"folds": 0}).refit is None
    with pytest.raises(SpecError, match=r"spec\.refitFull: true refits bagged models"):
        _plan(preset="medium", refitFull=True)
    timed = _plan(preset="best", timeLimitSeconds=600)
    assert timed.refit is not None and timed.refit.reserve_seconds == 90.0  # 15% of the budget, kept for it
