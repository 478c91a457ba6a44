"""Hypothesis strategies for TabularJob manifests: a valid base mutated along the CRD's own field paths.

Shared by the in-process fuzz test (no tracebacks) and the e2e agreement test (what validate accepts, the API server
admits). Mutations are half plausible (values the schema could accept, so many results stay valid) and half hostile.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from tabjob.api import crdgen

BASE: dict[str, Any] = {
    "apiVersion": "tabjob.dev/v1alpha1",
    "kind": "TabularJob",
    "metadata": {"name": "fuzz"},
    "spec": {
        "data": {"train": "/data/train.csv", "label": "class"},
        "output": {"path": "/output/fuzz"},
        "resources": {"cpus": 4},
        "models": {"GBM": [{}]},
    },
}

HOSTILE_STRINGS = [
    "", " ", "y", "n", "yes", "off", "1e20", "2.0", "-1", "0x10", "1:30", "null", "~", ".inf", ".nan", "a" * 300,
    "/output", "/output/../etc", "/tmp", "sklearn://iris", "sklearn://nope", "sklearn://iris?split=x", "hostPath",
    "Big_Name", "1st", "a/b/c", "example.com/gpu", "-x", "x-", "é", "\t", "64Gi", "64GB", "2Ei", "0", "Exists",
    "Equal", "NoExecute", "rmse", "roc_auc", "binary", "regression", "GBM", "NN_TORCH", "system-node-critical",
]  # fmt: skip


def leaf_paths() -> list[tuple[list[str | int], dict[str, Any]]]:
    """(path, schema) of every field under spec and metadata's name, as the generated CRD declares them."""
    schema = crdgen.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    out: list[tuple[list[str | int], dict[str, Any]]] = [(["metadata", "name"], {"type": "string"})]

    def walk(node: dict[str, Any], path: list[str | int]) -> None:
        out.append((path, node))
        for name, child in node.get("properties", {}).items():
            walk(child, [*path, name])
        if isinstance(node.get("items"), dict):
            walk(node["items"], [*path, 0])
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], [*path, "k"])

    walk(schema, ["spec"])
    return out


PATHS = leaf_paths()


def minimal(schema: dict[str, Any]) -> Any:
    """The smallest value the schema's structure admits: required properties filled, recursively."""
    kind = schema.get("type")
    if "default" in schema:
        return copy.deepcopy(schema["default"])
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal(props[name]) for name in schema.get("required", [])}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return int(schema.get("minimum", 0))
    if kind == "boolean":
        return False
    return "/x" if str(schema.get("pattern", "")).startswith("^/") else "x"


def plausible(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A value of the schema's type, often within its bounds (invalid ones are the hostile half's job)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    lo, hi = schema.get("minimum", -5), schema.get("maximum", 100)
    if kind == "integer":
        return st.integers(int(lo), int(min(hi, lo + 200)))
    if kind == "number":
        return st.one_of(st.sampled_from([0, 0.25, 0.5, 1, 2, 1 / 3]), st.floats(lo, min(hi, lo + 64)))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        item = schema.get("items", {})
        return st.lists(st.just(minimal(item)) if item.get("type") == "object" else st.integers(0, 9), max_size=3)
    if kind == "object":
        return st.just(minimal(schema))
    return st.sampled_from(HOSTILE_STRINGS[16:]) | st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)


hostile_values: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(HOSTILE_STRINGS),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=70),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
)


SCHEMAS = {tuple(path): schema for path, schema in PATHS}


def _set(doc: dict[str, Any], path: list[str | int], value: Any) -> None:
    """Set ``path`` to ``value``, creating what is missing on the way as the schema's minimal value."""
    node: Any = doc
    for i, part in enumerate(path[:-1]):
        want_list = isinstance(path[i + 1], int)
        fresh = minimal(SCHEMAS.get(tuple(path[: i + 1]), {}))
        if not isinstance(fresh, list | dict) or isinstance(fresh, list) != want_list:
            fresh = [] if want_list else {}
        if isinstance(node, list):
            while len(node) <= int(part):
                node.append(copy.deepcopy(fresh))
            if isinstance(node[int(part)], list) != want_list or not isinstance(node[int(part)], list | dict):
                node[int(part)] = fresh
            node = node[int(part)]
        else:
            child = node.get(part)
            if not isinstance(child, list | dict) or isinstance(child, list) != want_list:
                node[part] = fresh
            node = node[part]
    last = path[-1]
    if isinstance(node, list):
        while len(node) <= int(last):
            node.append(minimal(SCHEMAS.get(tuple(path), {})))
        node[int(last)] = value
    else:
        node[last] = value


@st.composite
def manifests(draw: st.DrawFn, max_mutations: int = 4) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(0, max_mutations))):
        path, schema = draw(st.sampled_from(PATHS))
        value = draw(plausible(schema) if draw(st.integers(0, 9)) < 7 else hostile_values)
        _set(doc, list(path), value)
    return doc
