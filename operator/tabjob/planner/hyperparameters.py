"""Hyperparameter names checked against what the family reads: LightGBM's parameters, tabjob's networks' settings.

A misspelt name (``lr`` for ``learning_rate``) would otherwise train the defaults without a word, and the user would
read the leaderboard as the effect of a setting that never applied: tabjob's networks ignore it, and LightGBM only
warns (quietly, at verbose -1). CatBoost refuses unknown names itself; XGBoost has no list to check against. Pure,
and run by the planner, so ``tabjob validate``, ``tabjob run`` and the operator refuse the manifest the same way,
before anything is created.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from tabjob.api import ModelConfig, TabularJobSpec
from tabjob.errors import SpecError
from tabjob.families import FAMILIES
from tabjob.plan_model import ConfigPlan

_LIST_ALL = 30  # valid names listed in full up to this many


def check_hyperparameter_names(spec: TabularJobSpec, resolved: Iterable[tuple[ConfigPlan, ModelConfig]]) -> None:
    """Every config's hyperparameters and every search-space entry use names their family reads."""
    problems: list[tuple[str, str]] = []
    keys = {key: key for key in FAMILIES}  # searchSpace targets: a family key or a config name
    for plan, cfg in resolved:
        keys[plan.name] = plan.key
        problems += _unknown(plan.key, cfg.hyperparameters, f"{plan.field}.hyperparameters")
    for target, params in spec.tuning.search_space.items():
        if target in keys:  # other targets are refused by the planner's own search-space check
            problems += _unknown(keys[target], params, f"spec.tuning.searchSpace.{target}")
    if problems:
        raise SpecError(problems)


def _unknown(key: str, params: Iterable[str], where: str) -> list[tuple[str, str]]:
    family = FAMILIES[key]
    names = family.hyperparameter_names
    if names is None:
        return []
    return [(f"{where}.{p}", _what_instead(p, family.library, names)) for p in params if p not in names]


def _what_instead(name: str, library: str, names: frozenset[str]) -> str:
    """Every valid name where they are few (a network's settings), else the closest few (LightGBM's 300)."""
    if len(names) <= _LIST_ALL:
        return f"not a {library} setting; use one of {', '.join(sorted(names))}"
    close = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.8)
    hint = f"; did you mean {' or '.join(close)}?" if close else " (its parameter names, or their aliases)"
    return f"not a {library} parameter{hint}"
