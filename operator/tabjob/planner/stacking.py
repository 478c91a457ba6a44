"""The stack layer's plan (spec.stacking, or the preset's): whether there is one, and what it may spend.

A stack reads the base models' out-of-fold predictions, so it needs bagging; it is one more leaderboard row, so it
needs room there; with ``timeLimitSeconds`` it is kept a share of the budget, since it can only start once every
base model is done. A stack the manifest asks for and cannot have is an error naming ``spec.stacking.levels``; one
a preset would add is left out, with a warning, where it does not fit.
"""

from __future__ import annotations

from tabjob.api import MAX_LEADERBOARD_ROWS, StackingSpec, TabularJobSpec
from tabjob.api.errors import SpecError
from tabjob.contracts.plan import StackPlan
from tabjob.planner.limits import leaderboard_rows

# The most of timeLimitSeconds the base models leave to the stack: its guard and its fits are default LightGBM bags,
# a few seconds on small tables; the trainer keeps less where the fits so far say so (its post_base.py).
RESERVE_FRACTION = 0.1


def wanted_levels(written: StackingSpec | None, folds: int, preset_stacks: bool) -> int:
    """Levels the manifest writes, or the preset's (one, when it stacks and the models are bagged)."""
    if written is not None:
        return written.levels
    return 1 if preset_stacks and folds >= 2 else 0


def stack_plan(spec: TabularJobSpec, preset_stacks: bool) -> tuple[StackPlan | None, list[str]]:
    """(the stack layer's plan or None, warnings) for a spec whose preset has been resolved."""
    levels = wanted_levels(spec.stacking, spec.bagging.folds, preset_stacks)
    if levels == 0:
        return None, []
    written = spec.stacking is not None
    if spec.bagging.folds < 2:
        raise SpecError.at(
            "spec.stacking.levels",
            f"{levels} needs the base models' out-of-fold predictions: set bagging.folds to 2 or more, or levels to 0",
        )
    rows = leaderboard_rows(spec)
    if rows + 1 > MAX_LEADERBOARD_ROWS:
        why = (
            f"the stack's row would make {rows + 1} leaderboard rows, over the {MAX_LEADERBOARD_ROWS} that "
            "status.models holds"
        )
        if written:
            raise SpecError.at("spec.stacking.levels", f"{why}; use fewer configs or trials, or levels 0")
        return None, [f"no stack layer: {why}"]
    cfg = spec.stacking or StackingSpec()
    reserve = RESERVE_FRACTION * spec.time_limit_seconds if spec.time_limit_seconds else 0.0
    return (
        StackPlan(
            levels=levels,
            holdout_fraction=cfg.holdout_fraction,
            base_models=cfg.base_models,
            reserve_seconds=round(reserve, 1),
        ),
        [],
    )
