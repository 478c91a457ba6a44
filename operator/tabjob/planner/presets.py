"""Presets: what a manifest leaves out (spec.models, spec.bagging) filled from the families' portfolios.

Pure, and the planner's first step, so ``tabjob plan`` shows exactly what a preset trains. In AutoGluon's
vocabulary:

- ``medium``: each family's first portfolio config, no bagging (AutoGluon's medium_quality trains its default
  configs on one holdout split).
- ``high``: the two strongest configs of each family, 5 folds, a stack layer (spec.stacking) and the deployed model
  refit on every row (spec.refitFull).
- ``best``: every portfolio config, 8 folds (AutoGluon's best_quality bags 8), a stack layer and the refit; with
  ``timeLimitSeconds`` it keeps going after the portfolio with seeded random configs from each family's search
  space, the families taking turns, until the leaderboard is full (63 rows with the ensemble, the stack and nine
  left for the refits): the
  time limit cuts them off where it runs out (fits that cannot start in time are skipped), then ensembles what
  finished. A budget is a promise to use it, so the list is longer than most budgets reach; it never ends before
  the time does.

Configs run in plan order, and the order is the priority: first the floor (LightGBM with its own defaults, what
a plain LGBMClassifier trains: the ensemble is always chosen against it), then the families' configs take turns by
rank (every family's first config, then every family's second, ...), so a short budget still trains every family.
In a job without GPUs a family that is costly on CPUs (``cpu_turns_late``: TabM) joins the turns late, after the
trees' second configs. Until the last family's first config starts, each config may use only its even share of the
time left, and after it one turn's worth (time_share.py), so a slow one cannot spend the turns of the families after
it.
Without a preset and without models, a job with ``timeLimitSeconds`` gets ``best`` (a user who sets a budget
expects it to be used) and one without gets ``medium``.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from tabjob.api import BaggingSpec, ModelsSpec, TabularJobSpec
from tabjob.api.identity import MAX_FITS, MAX_LEADERBOARD_ROWS
from tabjob.families import FAMILIES, ModelFamily
from tabjob.planner.refit import ROWS as REFIT_ROWS
from tabjob.planner.refit import wanted
from tabjob.planner.search_space import DEFAULT_SPACES, sample
from tabjob.planner.stacking import wanted_levels


@dataclass(frozen=True)
class Preset:
    name: str
    configs_per_family: int | None  # None: the whole portfolio
    folds: int
    random_configs: bool  # with a time limit: seeded random configs after the portfolio, as many as fit
    stack: bool  # a stack layer over the base models when they are bagged (spec.stacking left out)
    refit: bool = False  # the deployed model refit on every row when bagged (spec.refitFull left out)


PRESETS: dict[str, Preset] = {
    "medium": Preset("medium", configs_per_family=1, folds=0, random_configs=False, stack=False),
    "high": Preset("high", configs_per_family=2, folds=5, random_configs=False, stack=True, refit=True),
    "best": Preset("best", configs_per_family=None, folds=8, random_configs=True, stack=True, refit=True),
}


def preset_of(spec: TabularJobSpec) -> Preset | None:
    """The preset that fills this spec, or None when the manifest names its models and its bagging itself."""
    if spec.preset is not None:
        return PRESETS[spec.preset]
    if "models" in spec.model_fields_set:
        return None
    return PRESETS["best" if spec.time_limit_seconds is not None else "medium"]


def resolve(spec: TabularJobSpec, preset: Preset | None) -> tuple[TabularJobSpec, list[str] | None]:
    """The spec with ``preset``'s (``preset_of(spec)``) models and bagging where the manifest has none, and the
    configs' run order when the preset chose them (None: the manifest's own order)."""
    if preset is None:
        return spec, None
    update: dict[str, Any] = {}
    if "bagging" not in spec.model_fields_set:
        update["bagging"] = BaggingSpec(folds=preset.folds)
    chosen: list[tuple[str, str, dict[str, Any]]] = []
    if "models" not in spec.model_fields_set:
        bagging: BaggingSpec = update.get("bagging") or spec.bagging
        chosen = portfolio(preset, spec, bagging)
        models: dict[str, list[dict[str, Any]]] = {}
        for key, name, hyperparameters in chosen:
            models.setdefault(key, []).append({"name": name, "hyperparameters": hyperparameters})
        update["models"] = ModelsSpec.model_validate(models)
    if not update:
        return spec, None
    resolved = spec.model_copy(update=update)
    # model_copy keeps the original fields_set; the filled fields now count as written.
    resolved.model_fields_set.update(update)
    return resolved, ([name for _, name, _ in chosen] or None)


def portfolio(preset: Preset, spec: TabularJobSpec, bagging: BaggingSpec) -> list[tuple[str, str, dict[str, Any]]]:
    """(key, name, hyperparameters) in run order: the families' configs taking turns by rank, then random ones,
    as many as the leaderboard and the plan's fit limit hold."""
    families = [f for f in FAMILIES.values() if f.in_presets]
    chosen = [(f.key, f.floor[0], dict(f.floor[1])) for f in families if f.floor]
    cpu_only = spec.resources.gpus == 0
    columns = [_family_configs(f, preset, f.cpu_turns_late if cpu_only else 0) for f in families]
    for rank in zip_longest(*columns):
        chosen.extend(c for c in rank if c is not None)
    room = _room(spec, bagging, preset)
    if spec.time_limit_seconds is not None and preset.random_configs:
        i = 0
        while len(chosen) < room:
            i += 1
            chosen.extend((f.key, f"{f.key}_rand{i}", _random_config(f, i)) for f in families)
    return chosen[:room]


def _family_configs(f: ModelFamily, preset: Preset, late: int) -> list[tuple[str, str, dict[str, Any]] | None]:
    """The family's configs in its column of turns, ``late`` empty turns first."""
    configs = f.portfolio[: preset.configs_per_family] if preset.configs_per_family else f.portfolio
    skipped: list[tuple[str, str, dict[str, Any]] | None] = [None] * late
    return skipped + [(f.key, name, dict(hp)) for name, hp in configs]


def _room(spec: TabularJobSpec, bagging: BaggingSpec, preset: Preset) -> int:
    """Configs that fit the leaderboard (one row each, the ensemble's and the stack's) and the plan's fit limit."""
    trials = spec.tuning.trials
    per_config = trials * (bagging.folds * bagging.sets if bagging.folds >= 2 else 1)
    stacked = wanted_levels(spec.stacking, bagging.folds, preset.stack)
    refit_rows = REFIT_ROWS if wanted(spec.refit_full, bagging.folds, preset.refit) else 0
    return max(1, min((MAX_LEADERBOARD_ROWS - 1 - stacked - refit_rows) // trials, MAX_FITS // per_config))


def _random_config(f: ModelFamily, index: int) -> dict[str, Any]:
    """A seeded draw from the family's default space: the same plan for the same spec, on every machine."""
    digest = hashlib.sha256(f"preset/{f.key}/{index}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return {param: sample(dim, rng) for param, dim in sorted(DEFAULT_SPACES[f.key].items())}
