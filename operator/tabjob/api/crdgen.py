"""Generate the CRDs from the pydantic models (``make crds``; ``--check`` fails on drift): the TabularJob's, and
with ``--kind TabularPrediction`` the TabularPrediction's (operator/tabjob/api/crdgen_prediction.py).

pydantic's JSON Schema is turned into a Kubernetes structural schema: references inlined, ``anyOf`` with
null folded away (an omitted field is simply absent), titles dropped, defaults written in (including those
of default factories, so the API server fills them), maps and lists bounded so CEL cost estimates fit the
API server's budget, and free-form maps marked ``x-kubernetes-preserve-unknown-fields``.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from tabjob import api
from tabjob.api.k8s_names import DNS1035_LABEL_PATTERN

MAX_ITEMS = 64  # bound for lists and maps without their own, so CEL cost estimation stays finite

IMMUTABLE_WHILE_RUNNING = ["data", "output", "resources", "models", "bagging", "tuning", "ensemble"]

PRINTER_COLUMNS = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "description": "Lifecycle phase."},
    {
        "name": "Progress",
        "type": "string",
        "jsonPath": ".status.progress.summary",
        "description": "Fits done/total.",
    },
    {
        "name": "GPUs",
        "type": "integer",
        "jsonPath": ".status.requestedGpus",
        "description": "Whole GPUs requested.",
    },
    {
        "name": "Admission",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Admitted")].reason',
        "description": "Kueue admission: Admitted, Queued, Inadmissible or Preempted (jobs with a queueName).",
    },
    {"name": "Best", "type": "string", "jsonPath": ".status.bestModel", "description": "Best model so far."},
    {"name": "Score", "type": "number", "jsonPath": ".status.score", "description": "Best validation score."},
    {"name": "Metric", "type": "string", "jsonPath": ".status.evalMetric", "priority": 1},
    {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _factory_defaults(model: type[BaseModel], out: dict[str, dict[str, Any]]) -> None:
    """Defaults of default_factory fields, per model and alias; pydantic leaves them out of the schema."""
    defaults: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        alias = info.alias or name
        if info.default_factory is not None and not _preset_fills(info):
            value = info.default_factory()  # type: ignore[call-arg]
            defaults[alias] = (
                value.model_dump(by_alias=True, exclude_none=True, mode="json")
                if isinstance(value, BaseModel)
                else value
            )
        for sub in _submodels(info):
            if sub.__name__ not in out:
                out[sub.__name__] = {}
                _factory_defaults(sub, out)
    out[model.__name__] = defaults


def _preset_fills(info: FieldInfo) -> bool:
    extra = info.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("x-tabjob-preset-fills"))


def _submodels(info: FieldInfo) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []

    def walk(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            found.append(tp)
        for arg in getattr(tp, "__args__", ()) or ():
            walk(arg)

    walk(info.annotation)
    return found


def _structural(node: Any, defs: dict[str, Any], factories: dict[str, dict[str, Any]]) -> Any:
    if isinstance(node, list):
        return [_structural(n, defs, factories) for n in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if "$ref" in node:
        name = node.pop("$ref").rsplit("/", 1)[1]
        merged = copy.deepcopy(defs[name])
        merged.update(node)  # the referring field's description and default win
        node = merged
        node.setdefault("x-tabjob-model", name)
    if "anyOf" in node:
        options = [o for o in node.pop("anyOf") if o != {"type": "null"}]
        if len(options) != 1:
            raise ValueError(f"cannot express a union of {len(options)} types structurally: {options}")
        inner = options[0]
        if "$ref" in inner:
            inner = _structural(inner, defs, factories)
        node = {**inner, **node}
    node.pop("title", None)
    # pydantic writes the bounds of a validated-then-constrained integer (api.Int) under their Python names.
    for python_name, openapi_name in (("ge", "minimum"), ("le", "maximum")):
        if python_name in node:
            node[openapi_name] = node.pop(python_name)
    # JSON Schema 2020-12 writes an exclusive bound as a number; the API server's OpenAPI v3.0 wants the bound in
    # minimum/maximum and exclusiveMinimum/exclusiveMaximum as booleans (it refuses the CRD otherwise).
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(exclusive), int | float) and not isinstance(node[exclusive], bool):
            node[bound], node[exclusive] = node[exclusive], True
    if "const" in node:
        node["enum"] = [node.pop("const")]
    model_name = node.pop("x-tabjob-model", None)
    node.pop("x-tabjob-preset-fills", None)  # a Python-side marker: the field simply has no default in the CRD
    if node.get("x-kubernetes-preserve-unknown-fields"):
        node.pop("additionalProperties", None)
        node.pop("items", None) if node.get("type") != "array" else None
    if node.get("additionalProperties") is False:
        node.pop("additionalProperties")
    if node.get("default") is None:
        node.pop("default", None)
    out = {k: _structural(v, defs, factories) for k, v in node.items()}
    if "properties" in out and model_name in factories:
        for alias, default in factories[model_name].items():
            if alias in out["properties"]:
                out["properties"][alias].setdefault("default", default)
    if out.get("type") == "array" and "maxItems" not in out:
        out["maxItems"] = MAX_ITEMS
    if out.get("type") == "object" and isinstance(out.get("additionalProperties"), dict):
        out.setdefault("maxProperties", MAX_ITEMS)
    return out


def openapi_schema() -> dict[str, Any]:
    raw = api.TabularJob.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    factories: dict[str, dict[str, Any]] = {}
    _factory_defaults(api.TabularJob, factories)
    full = _structural({**raw, "x-tabjob-model": "TabularJob"}, defs, factories)
    props = full["properties"]
    spec = props["spec"]
    status = props["status"]
    status["properties"]["conditions"].update({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})
    same = " && ".join(
        f"((!has(self.spec.{f}) && !has(oldSelf.spec.{f})) || (has(self.spec.{f}) && has(oldSelf.spec.{f}) && "
        f"self.spec.{f} == oldSelf.spec.{f}))"
        for f in IMMUTABLE_WHILE_RUNNING
    )
    return {
        "type": "object",
        "description": "A tabular training run (LightGBM, CatBoost, XGBoost and PyTorch models or a preset, "
        "bagging, trials, a weighted ensemble) with predictor-level and per-model CPU/GPU requests.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "tabjob.dev/v1alpha1"},
            "kind": {"type": "string", "description": "TabularJob"},
            "metadata": {"type": "object"},  # the API server allows nothing more here
            "spec": spec,
            "status": status,
        },
        "x-kubernetes-validations": [
            {
                "rule": "!has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase != 'Running'"
                f" || ({same})",
                "message": "spec fields "
                + ", ".join(IMMUTABLE_WHILE_RUNNING)
                + " cannot change while the job is Running; suspend it (spec.runPolicy.suspend: true) or "
                "create a new TabularJob",
                "reason": "FieldValueForbidden",
                "fieldPath": ".spec",
            },
            {
                # The name becomes the Service's (a DNS-1035 label) and the pods' host names <name>-<i>-r<n>.
                "rule": f"size(self.metadata.name) <= {api.MAX_NAME} && "
                f"self.metadata.name.matches(r'{DNS1035_LABEL_PATTERN}')",
                "message": f"metadata.name must be a DNS-1035 label of at most {api.MAX_NAME} characters (lowercase "
                "letters, digits and '-', starting with a letter): it names the job's Service and pods",
                "reason": "FieldValueInvalid",
            },
        ],
    }


def crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{api.PLURAL}.{api.GROUP}",
            "labels": {"app.kubernetes.io/name": "tabjob", "app.kubernetes.io/part-of": "tabjob"},
        },
        "spec": {
            "group": api.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": api.KIND,
                "listKind": f"{api.KIND}List",
                "plural": api.PLURAL,
                "singular": api.SINGULAR,
                "shortNames": api.SHORT_NAMES,
                "categories": ["all", "ml"],
            },
            "versions": [
                {
                    "name": api.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                }
            ],
        },
    }


def render() -> str:
    header = "# Generated by `make crds` from operator/tabjob/api/. Do not edit by hand.\n"
    return header + yaml.safe_dump(crd(), sort_keys=False, width=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tabjob.api.crdgen", description=__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--output", help="write the CRD to this file")
    group.add_argument("--check", nargs="+", metavar="FILE", help="fail when a file differs from the models")
    parser.add_argument("--kind", choices=[api.KIND, "TabularPrediction"], default=api.KIND, help="which CRD")
    args = parser.parse_args(argv)
    if args.kind == api.KIND:
        text = render()
    else:
        from tabjob.api.crdgen_prediction import render as render_prediction

        text = render_prediction()
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
        return 0
    stale = [f for f in args.check if not Path(f).exists() or Path(f).read_text() != text]
    for f in stale:
        print(f"{f} differs from what operator/tabjob/api/ generates: run `make crds`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
