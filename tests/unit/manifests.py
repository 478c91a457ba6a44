"""Small manifest builders for the unit tests: a valid base and a deep-merge to vary it."""

from __future__ import annotations

import copy
from typing import Any


def base() -> dict[str, Any]:
    return {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": "t"},
        "spec": {
            "data": {"train": "/data/train.csv", "label": "y"},
            "output": {"path": "/output/t"},
            "resources": {"cpus": 8, "gpus": 0},
            "models": {"GBM": [{}]},
        },
    }


def merge(doc: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``patch`` into a copy of ``doc``; a value of None deletes the key."""
    out = copy.deepcopy(doc)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def spec(**patch: Any) -> dict[str, Any]:
    """A manifest whose spec is the base spec merged with ``patch``; ``models`` replaces the base's."""
    doc = base()
    if "models" in patch:
        doc["spec"]["models"] = {}
    return merge(doc, {"spec": patch})
