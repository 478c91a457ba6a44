"""The served model's PodMonitor against prometheus-operator's own CRD schema, and against the chart's monitors.

The CRDs come from the prometheus-operator Go module that hack/cluster/tools/prometheus-operator/go.mod pins
(hack/cluster/build.sh copies them into the cluster cache); the serving e2e creates the same object in a real API
server. Here a small structural check of the CRD's openAPIV3Schema (types, required fields, unknown fields, enums,
patterns), which is what the API server's validation and pruning act on, and which the chart's own PodMonitor and
ServiceMonitor must pass too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.chart_tools import objects
from tabjob_trainer.serving.monitor import pod_monitor

MONITORS = ("monitoring.coreos.com/v1/PodMonitor", "monitoring.coreos.com/v1/ServiceMonitor")


def _schema(kind: str) -> dict[str, Any]:
    from hack.cluster.controlplane import binaries

    crd = yaml.safe_load(
        (Path(binaries(build=True)["PROMOP_CRDS"]) / f"monitoring.coreos.com_{kind}s.yaml").read_text()
    )
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return dict(version["schema"]["openAPIV3Schema"])


def violations(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Where ``value`` breaks a structural OpenAPI v3 schema, one message per place."""
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, (int, str)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: {value!r} is neither an integer nor a string"]
    kind, out = schema.get("type"), []
    types: dict[str, type | tuple[type, ...]] = {
        "object": dict,
        "array": list,
        "string": str,
        "integer": int,
        "boolean": bool,
        "number": (int, float),
    }
    if kind in types and (not isinstance(value, types[kind]) or (kind == "integer" and isinstance(value, bool))):
        return [f"{path}: {value!r} is not of type {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if kind == "string" and "pattern" in schema and not re.search(schema["pattern"], value):
        out.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if kind == "array":
        for i, item in enumerate(value):
            out += violations(item, schema.get("items", {}), f"{path}[{i}]")
    if kind == "object":
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        out += [f"{path}.{key}: required" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            if props is not None and key in props:
                out += violations(item, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += violations(item, extra, f"{path}.{key}")
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                out.append(f"{path}.{key}: unknown field")
    return out


@pytest.mark.parametrize("namespace", ["ml", None])
def test_the_served_models_pod_monitor_fits_the_crd(namespace: str | None) -> None:
    assert violations(pod_monitor("adult", namespace), _schema("podmonitor")) == []


def test_the_check_catches_what_the_api_server_would_refuse() -> None:
    wrong = pod_monitor("adult", "ml")
    wrong["spec"]["podMetricsEndpoint"] = wrong["spec"].pop("podMetricsEndpoints")  # a typo
    del wrong["spec"]["selector"]
    assert violations(wrong, _schema("podmonitor")) == [
        ".spec.selector: required",
        ".spec.podMetricsEndpoint: unknown field",
    ]
    endpoint = pod_monitor("adult", "ml")["spec"]["podMetricsEndpoints"][0]
    schema = _schema("podmonitor")["properties"]["spec"]["properties"]["podMetricsEndpoints"]["items"]
    assert violations({**endpoint, "interval": "often"}, schema) == [
        f".interval: 'often' does not match {schema['properties']['interval']['pattern']}"
    ]


def _chart_monitors() -> dict[str, dict[str, Any]]:
    args = [arg for api in MONITORS for arg in ("--api-versions", api)]
    docs = objects(*args, "--set", "metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true")
    return {d["kind"]: d for d in docs if d["kind"] in ("PodMonitor", "ServiceMonitor")}


def test_the_chart_and_a_served_model_are_scraped_the_same_way() -> None:
    chart = _chart_monitors()
    assert violations(chart["PodMonitor"], _schema("podmonitor")) == []
    assert violations(chart["ServiceMonitor"], _schema("servicemonitor")) == []
    served = pod_monitor("adult", "ml")["spec"]["podMetricsEndpoints"]
    # Same port name, path, interval and timeout as the chart's defaults: one scrape convention for all of tabjob.
    assert served == chart["PodMonitor"]["spec"]["podMetricsEndpoints"]
    assert served == chart["ServiceMonitor"]["spec"]["endpoints"]
    # Both select pods by a tabjob.dev/ label.
    (expression,) = chart["PodMonitor"]["spec"]["selector"]["matchExpressions"]
    assert expression["key"].startswith("tabjob.dev/")
    assert all(k.startswith("tabjob.dev/") for k in pod_monitor("adult", "ml")["spec"]["selector"]["matchLabels"])
