"""Input for the second kind: a document in, a `TabularPrediction` or a `SpecError` out, one line per bad field."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tabjob.api.errors import SpecError
from tabjob.api.identity import API_VERSION
from tabjob.api.manifest_yaml import json_problems
from tabjob.api.parse import _problems, without_nulls
from tabjob.api.prediction import PREDICTION_KIND, TabularPrediction


def is_prediction(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == PREDICTION_KIND


def parse_prediction(doc: Any) -> TabularPrediction:
    """Validate one TabularPrediction document; every problem becomes (field path, message) in a SpecError."""
    if not isinstance(doc, dict):
        raise SpecError.at("(document)", f"a TabularPrediction manifest is a mapping, got {type(doc).__name__}")
    not_json = json_problems(doc)
    if not_json:
        raise SpecError(not_json)
    doc = without_nulls(doc)
    if doc.get("apiVersion") != API_VERSION:
        raise SpecError.at("apiVersion", f"must be {API_VERSION}, got {doc.get('apiVersion')!r}")
    try:
        tp = TabularPrediction.model_validate(doc)
    except ValidationError as exc:
        lines = _problems(exc, doc)
        hint = ("kubectl explain tabularjob.spec", "kubectl explain tabularprediction.spec")
        lines = [(f, m.replace(*hint)) for f, m in lines]
        raise SpecError(lines) from None
    seen: set[str] = set()
    problems = []
    for i, var in enumerate(tp.spec.env):  # the API server refuses a repeated key of a map-typed list
        if var.name in seen:
            problems.append((f"spec.env[{i}].name", f"{var.name} is given twice; set each variable once"))
        seen.add(var.name)
    if problems:
        raise SpecError(problems)
    return tp


def prediction_manifest(tp: TabularPrediction) -> dict[str, Any]:
    """The wire form (camelCase), without unset optional fields."""
    return tp.model_dump(by_alias=True, exclude_none=True, mode="json")
