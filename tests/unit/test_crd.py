"""The generated CRD: in sync with the models, structural, described, with the columns users read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tabjob.api import crdgen

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "tabjob.dev_tabularjobs.yaml"
CHART_CRD = ROOT / "charts" / "tabjob" / "crds" / "tabjob.dev_tabularjobs.yaml"


def _schema() -> dict[str, Any]:
    return crdgen.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_committed_crds_match_the_models() -> None:
    assert crdgen.main(["--check", str(CRD_FILE), str(CHART_CRD)]) == 0, "run `make crds`"


def test_drift_is_detected(tmp_path: Path) -> None:
    stale = tmp_path / "crd.yaml"
    stale.write_text(CRD_FILE.read_text().replace("tabularjobs", "tabularjob", 1))
    assert crdgen.main(["--check", str(stale)]) == 1


def test_names_and_subresources() -> None:
    crd = crdgen.crd()
    names = crd["spec"]["names"]
    assert crd["metadata"]["name"] == "tabularjobs.tabjob.dev"
    assert (names["kind"], names["plural"], names["shortNames"]) == ("TabularJob", "tabularjobs", ["tj", "tabjob"])
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert {"Phase", "GPUs", "Best", "Score", "Age"} <= set(columns)


def _walk(node: dict[str, Any], path: str, visit: Any) -> None:
    visit(node, path)
    for name, child in node.get("properties", {}).items():
        _walk(child, f"{path}.{name}", visit)
    if isinstance(node.get("additionalProperties"), dict):
        _walk(node["additionalProperties"], f"{path}{{}}", visit)
    if isinstance(node.get("items"), dict):
        _walk(node["items"], f"{path}[]", visit)


def test_schema_is_structural() -> None:
    bad: list[str] = []

    def visit(node: dict[str, Any], path: str) -> None:
        free = node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string")
        if "type" not in node and not free:
            bad.append(f"{path}: no type")
        for forbidden in ("$ref", "anyOf", "oneOf", "allOf", "title", "definitions", "$defs"):
            if forbidden in node:
                bad.append(f"{path}: {forbidden}")
        if node.get("additionalProperties") is not None and node.get("properties"):
            bad.append(f"{path}: properties and additionalProperties together")

    _walk(_schema(), "", visit)
    assert not bad, bad


def test_every_field_is_described() -> None:
    missing: list[str] = []

    def visit(node: dict[str, Any], path: str) -> None:
        for name, child in node.get("properties", {}).items():
            if path == "" and name == "metadata":
                continue  # the API server forbids anything but `type` on the root metadata
            if not child.get("description"):
                missing.append(f"{path}.{name}")

    _walk(_schema(), "", visit)
    assert not missing, missing


def test_defaults_are_written_into_the_schema() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    assert spec["bagging"]["properties"]["folds"]["default"] == 0
    # Fields a preset fills have no default of their own: the API server must not fill them before the planner.
    assert "default" not in spec["bagging"] and "default" not in spec["models"]
    assert spec["resources"]["properties"]["gpuResource"]["default"] == "nvidia.com/gpu"
    assert spec["onGpuUnavailable"]["default"] == "Fail"
    assert spec["ensemble"]["properties"]["size"]["default"] == 25


def test_cel_rules_cover_cross_field_checks() -> None:
    schema = _schema()
    spec = schema["properties"]["spec"]["properties"]
    folds_rules = [r["rule"] for r in spec["bagging"]["x-kubernetes-validations"]]
    assert "self.folds == 0 || self.folds >= 2" in folds_rules
    fit = spec["models"]["properties"]["GBM"]["items"]["properties"]["resources"]
    assert any("1.0 / self.gpus" in r["rule"] for r in fit["x-kubernetes-validations"])
    transition = schema["x-kubernetes-validations"][0]
    assert "oldSelf.status.phase != 'Running'" in transition["rule"]
    assert "self.spec.models == oldSelf.spec.models" in transition["rule"]


def test_free_form_maps_keep_their_fields() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    hp = spec["models"]["properties"]["NN_TORCH"]["items"]["properties"]["hyperparameters"]
    assert hp.get("x-kubernetes-preserve-unknown-fields") is True
    # Volume sources are typed: only the allowed kinds are properties, so hostPath is an unknown field.
    volume = spec["data"]["properties"]["volume"]
    assert "x-kubernetes-preserve-unknown-fields" not in volume
    assert set(volume["properties"]) == {"persistentVolumeClaim", "configMap", "secret", "emptyDir", "csi", "nfs"}


def test_file_is_valid_yaml_with_a_header() -> None:
    text = CRD_FILE.read_text()
    assert text.startswith("# Generated by `make crds`")
    assert yaml.safe_load(text)["kind"] == "CustomResourceDefinition"


def test_every_spec_number_and_list_is_bounded() -> None:
    # An unbounded number reaches pod requests (cpus: 1e20); an unbounded list outgrows status and CEL's budget.
    unbounded: list[str] = []

    def visit(node: dict[str, Any], path: str) -> None:
        kind = node.get("type")
        if kind in ("integer", "number") and "maximum" not in node:
            unbounded.append(f"{path}: no maximum")
        if kind == "array" and "maxItems" not in node:
            unbounded.append(f"{path}: no maxItems")
        if kind == "object" and isinstance(node.get("additionalProperties"), dict) and "maxProperties" not in node:
            unbounded.append(f"{path}: no maxProperties")

    _walk(_schema()["properties"]["spec"], "spec", visit)
    assert not unbounded, unbounded


def test_limit_rules_and_name_rule_are_in_the_crd() -> None:
    schema = _schema()
    spec_rules = " ".join(r["rule"] for r in schema["properties"]["spec"]["x-kubernetes-validations"])
    assert "<= 64" in spec_rules and "<= 1000" in spec_rules
    root_rules = " ".join(r["rule"] for r in schema["x-kubernetes-validations"])
    assert "self.metadata.name.matches(" in root_rules and "size(self.metadata.name) <= 50" in root_rules


def test_output_is_optional_with_a_default_inside_the_mount() -> None:
    spec = _schema()["properties"]["spec"]
    assert "output" not in spec["required"]
    assert spec["properties"]["output"]["default"] == {"path": "/output"}


def test_exclusive_bounds_are_written_as_the_api_server_reads_them() -> None:
    """JSON Schema 2020-12 gives an exclusive bound as a number (pydantic's gt=0); the API server's OpenAPI v3.0
    refused the whole CRD for it ("exclusiveMinimum: expected boolean"). The bound goes to minimum instead."""

    def walk(node: object) -> list[dict[str, object]]:
        if isinstance(node, dict):
            return [node, *(n for v in node.values() for n in walk(v))]
        if isinstance(node, list):
            return [n for v in node for n in walk(v)]
        return []

    nodes = walk(_schema())
    for node in nodes:
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            assert key not in node or node[key] is True, node
    limit = _schema()["properties"]["spec"]["properties"]["inferLimitMsPer1000Rows"]
    assert limit["minimum"] == 0 and limit["exclusiveMinimum"] is True
