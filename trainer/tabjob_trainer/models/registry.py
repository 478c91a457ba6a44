"""The model-family registry: binds each key of ``tabjob.families`` to the module that fits and loads it.

In the shape of Lightning's accelerator registry and kubeflow/trainer's plugin registry: each family lives in a
module of its own (its ``trainer_module`` in ``tabjob.families``) that declares a ``FAMILY`` (``base.Family``: the
shared facts bound to its fit/predict/load). Modules are imported on first use, so a rank that only fits
gradient-boosted trees never imports torch. ``known_keys()`` is what validation offers when a key is unknown.
"""

from __future__ import annotations

import importlib

from tabjob import families
from tabjob_trainer.models.base import Family

_MODULES: dict[str, str] = {key: f.trainer_module for key, f in families.FAMILIES.items()}


class UnknownModelError(ValueError):
    """A model key no family is registered for."""


def known_keys() -> tuple[str, ...]:
    return tuple(_MODULES)


def family(key: str) -> Family:
    """The family for a spec key; an unknown key is an error naming the known ones."""
    if key not in _MODULES:
        raise UnknownModelError(f"unknown model key {key!r}; known keys: {', '.join(known_keys())}")
    declared = getattr(importlib.import_module(_MODULES[key]), "FAMILY", None)
    if not isinstance(declared, Family) or declared.key != key:
        raise UnknownModelError(f"{_MODULES[key]} does not declare FAMILY for model key {key!r}")
    return declared
