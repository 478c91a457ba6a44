"""Hyperparameters checked against what the family reads: LightGBM's and XGBoost's parameter names, tabjob's
networks' settings and the values each of those takes.

A misspelt name (``lr`` for ``learning_rate``) would otherwise train the defaults without a word, and the user would
read the leaderboard as the effect of a setting that never applied: tabjob's networks ignore it, LightGBM only
warns (quietly, at verbose -1) and XGBoost warns in the pod's log. CatBoost refuses unknown names itself. Pure,
and run by the planner, so ``tabjob validate``, ``tabjob run`` and the operator refuse the manifest the same way,
before anything is created. A network's values are checked too (``n_blocks: auto`` fails its first fit otherwise);
a search space's by its choices and its range's ends.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from tabjob.api import ModelConfig, SearchDimension, TabularJobSpec
from tabjob.api.errors import SpecError
from tabjob.contracts.plan import ConfigPlan
from tabjob.families import FAMILIES, ModelFamily

_LIST_ALL = 30  # valid names listed in full up to this many


def check_hyperparameters(spec: TabularJobSpec, resolved: Iterable[tuple[ConfigPlan, ModelConfig]]) -> None:
    """Every config's hyperparameters and every search-space entry use names their family reads, and a network's
    settings values they take."""
    problems: list[tuple[str, str]] = []
    keys = {key: key for key in FAMILIES}  # searchSpace targets: a family key or a config name
    for plan, cfg in resolved:
        keys[plan.name] = plan.key
        where = f"{plan.field}.hyperparameters"
        problems += _unknown(plan.key, cfg.hyperparameters, where)
        problems += _bad_values(plan.key, {p: ([v], False) for p, v in cfg.hyperparameters.items()}, where)
    for target, params in spec.tuning.search_space.items():
        if target in keys:  # other targets are refused by the planner's own search-space check
            where = f"spec.tuning.searchSpace.{target}"
            problems += _unknown(keys[target], params, where)
            problems += _bad_values(keys[target], {p: _values(d) for p, d in params.items()}, where)
    if problems:
        raise SpecError(problems)


def _unknown(key: str, params: Iterable[str], where: str) -> list[tuple[str, str]]:
    family = FAMILIES[key]
    names = family.hyperparameter_names
    if names is None:
        return []
    return [(f"{where}.{p}", _what_instead(p, family)) for p in params if p not in names]


def _bad_values(key: str, values: dict[str, tuple[list[Any], bool]], where: str) -> list[tuple[str, str]]:
    """Values a network setting, or a key of a tree family's fit loop, does not take; ``values``: per name, the
    candidates and whether they are the ends of a continuous range (a whole-number setting takes those: the trainer
    reads a drawn 3.7 as 3)."""
    family = FAMILIES[key]
    settings = family.settings if family.settings is not None else family.loop_settings
    problems = []
    for name, (candidates, continuous) in values.items():
        setting = settings.get(name)
        if setting is None:
            continue  # an unknown name, reported by _unknown, or the library's own
        check = replace(setting, kind="number") if continuous and setting.kind == "int" else setting
        wrong = [p for p in map(check.problem, candidates) if p]
        if wrong:
            problems.append((f"{where}.{name}", f"{wrong[0]}; {name} takes {setting.describe()}"))
    return problems


def _values(dimension: SearchDimension) -> tuple[list[Any], bool]:
    """What decides a search-space entry's validity: every choice, or a range's two ends (and whether it is
    continuous)."""
    if dimension.choice is not None:
        return list(dimension.choice), False
    if dimension.int_ is not None:
        return list(dimension.int_), False
    return list(dimension.uniform or dimension.log_uniform or []), True


def _what_instead(name: str, family: ModelFamily) -> str:
    """The name under which tabjob has AutoGluon's (or scikit-learn's) spelling; else every valid name where they
    are few (a network's settings), else the closest few (LightGBM's 300, XGBoost's 80)."""
    renamed = dict(family.autogluon_renames)
    if name in renamed:
        return f"AutoGluon's name; tabjob's {family.library} calls it {renamed[name]}"
    names = family.hyperparameter_names or frozenset()
    if len(names) <= _LIST_ALL:
        return f"{family.library} has no such setting; use one of {', '.join(sorted(names))}"
    close = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.8)
    hint = f"; did you mean {' or '.join(close)}?" if close else " (its parameter names, or their aliases)"
    return f"{family.library} has no such parameter{hint}"
