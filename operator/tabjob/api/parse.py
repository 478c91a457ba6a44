"""Input: a manifest document in, a TabularJob or a SpecError out, one line per bad field naming it and what
would be valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)

from tabjob.api.errors import SpecError, field_path
from tabjob.api.identity import API_VERSION, KIND, MAX_NAME
from tabjob.api.manifest_yaml import json_problems, parse_yaml, read_text
from tabjob.api.pod_identity import ENV_SOURCE_REFUSED
from tabjob.api.resource import TabularJob
from tabjob.api.spec import TabularJobSpec, builtin_dataset, metric_mismatch
from tabjob.api.volumes import DATA_VOLUME_SOURCES, OUTPUT_VOLUME_SOURCES
from tabjob.families import (
    BUILTIN_LABEL,
    BUILTIN_SCHEME,
    MODEL_KEYS,
)


def parse_manifest(doc: Any) -> TabularJob:
    """Validate one manifest document; every problem becomes (field path, message) in a SpecError."""
    if not isinstance(doc, dict):
        raise SpecError.at("(document)", f"a TabularJob manifest is a mapping, got {type(doc).__name__}")
    not_json = json_problems(doc)
    if not_json:
        raise SpecError(not_json)
    doc = without_nulls(doc)
    if doc.get("apiVersion") != API_VERSION:
        raise SpecError.at("apiVersion", f"must be {API_VERSION}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        raise SpecError.at("kind", f"must be {KIND}, got {doc.get('kind')!r}")
    try:
        job = TabularJob.model_validate(doc)
    except ValidationError as exc:
        raise SpecError(_problems(exc, doc)) from None
    problems = spec_problems(job.spec)
    if problems:
        raise SpecError(problems)
    return job


# Free-form values keep their nulls, as the API server keeps them under x-kubernetes-preserve-unknown-fields.
_FREE_FORM = frozenset({"hyperparameters", "choice"})


def without_nulls(node: Any) -> Any:
    """The document as the API server stores it: a null field is dropped (and then defaulted), as if never given."""
    if isinstance(node, dict):
        return {k: v if k in _FREE_FORM else without_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [without_nulls(v) for v in node]
    return node


def spec_problems(spec: TabularJobSpec) -> list[tuple[str, str]]:
    """Contradictions between fields that need no data: built-in datasets, label, problem type and metric."""
    data, out = spec.data, []
    problem: str = data.problem_type
    builtins: dict[str, tuple[str, str]] = {}
    for field in ("train", "test"):
        uri = getattr(data, field)
        if uri and uri.startswith(BUILTIN_SCHEME):
            builtins[field] = builtin_dataset(uri)
    for name, kind in builtins.values():
        if data.label != BUILTIN_LABEL:
            out.append(("spec.data.label", f"the built-in dataset {name} labels its rows {BUILTIN_LABEL!r}"))
        if problem not in ("auto", kind):
            out.append(("spec.data.problemType", f"the built-in dataset {name} is a {kind} problem, not {problem}"))
        problem = kind if problem == "auto" else problem
    if len({name for name, _ in builtins.values()}) > 1:
        out.append(("spec.data.test", "train and test must be splits of the same built-in dataset"))
    seen: set[str] = set()
    for i, var in enumerate(spec.env):  # the API server refuses a repeated key of a map-typed list
        if var.name in seen:
            out.append((f"spec.env[{i}].name", f"{var.name} is given twice; set each variable once"))
        seen.add(var.name)
    mismatch = metric_mismatch(problem, data.eval_metric)
    if mismatch:
        out.append(("spec.data.evalMetric", mismatch))
    return sorted(set(out))


_BOUND_WORDS = {
    "less_than_equal": ("most", "le"),
    "greater_than_equal": ("least", "ge"),
    "too_long": ("most", "max_length"),
    "too_short": ("least", "min_length"),
    "string_too_long": ("most", "max_length"),
    "string_too_short": ("least", "min_length"),
}
_UNITS = {
    "too_long": "items (the CRD's maxItems)",
    "too_short": "items",
    "string_too_long": "characters",
    "string_too_short": "characters",
}


def _bound_message(kind: str, ctx: dict[str, Any], got: Any) -> str:
    word, key = _BOUND_WORDS[kind]
    unit = f" {_UNITS[kind]}" if kind in _UNITS else ""
    seen = len(got) if isinstance(got, str | list | dict) else repr(got)[:40]
    bound = ctx.get(key)
    if isinstance(bound, float) and bound.is_integer():
        bound = int(bound)
    return f"must be at {word} {bound}{unit}, got {seen}"


def _problems(exc: ValidationError, doc: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for err in exc.errors():
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith(("function-", "lax-or-strict")))]
        msg = err["msg"].removeprefix("Value error, ")
        kind = err["type"]
        parent = loc[-2] if len(loc) >= 2 else None
        if kind == "extra_forbidden" and parent == "models" and len(loc) == 3:
            msg = f"no model family {loc[-1]!r}; use one of {', '.join(MODEL_KEYS)}"
        elif kind == "extra_forbidden" and parent == "volume":
            allowed = DATA_VOLUME_SOURCES if loc[1] == "data" else OUTPUT_VOLUME_SOURCES
            msg = f"{loc[-1]!r} is not an allowed volume source for {loc[1]}; use one of {', '.join(allowed)}"
        elif kind == "extra_forbidden" and parent == "valueFrom":
            msg = ENV_SOURCE_REFUSED
        elif kind == "extra_forbidden":
            msg = "unknown field (check the spelling; `kubectl explain tabularjob.spec` lists the fields)"
        elif kind == "string_pattern_mismatch":
            msg = f"{err.get('input')!r:.60} must match {err.get('ctx', {}).get('pattern')}"
        elif kind == "literal_error":
            msg = f"must be one of {err.get('ctx', {}).get('expected', '')}"
        elif kind == "missing" and loc == ["metadata", "name"]:
            hint = (
                " (generateName is not supported: the name must be known to plan)"
                if "generateName" in (doc.get("metadata") or {})
                else ""
            )
            msg = f"required: a DNS-1035 label of at most {MAX_NAME} characters, e.g. adult-gbm{hint}"
        elif kind == "missing":
            msg = "required field is missing"
        elif kind in _BOUND_WORDS:
            msg = _bound_message(kind, err.get("ctx", {}), err.get("input"))
        elif kind in ("int_type", "float_type", "bool_type", "string_type", "dict_type", "list_type", "model_type"):
            want = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
                    "string_type": "a string", "dict_type": "a mapping", "list_type": "a list",
                    "model_type": "a mapping"}[kind]  # fmt: skip
            got = err.get("input")
            msg = f"must be {want}, not {type(got).__name__} {got!r:.40}" + (
                " (the API server does not convert types: write it unquoted)" if isinstance(got, str) else ""
            )
        out.append((field_path(loc), msg))
    return out


def load_documents(path: str | Path) -> list[Any]:
    """Every YAML document of a file, read as kubectl reads it (see manifest_yaml)."""
    return parse_yaml(read_text(path), str(path))


def load_manifest(path: str | Path) -> TabularJob:
    """The single TabularJob in a file."""
    docs = load_documents(path)
    if len(docs) != 1:
        raise SpecError.at(str(path), f"expected one TabularJob document, found {len(docs)}")
    return parse_manifest(docs[0])


def to_manifest(job: TabularJob) -> dict[str, Any]:
    """The wire form (camelCase), without unset optional fields."""
    return job.model_dump(by_alias=True, exclude_none=True, mode="json")
