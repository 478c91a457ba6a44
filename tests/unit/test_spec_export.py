"""spec.export in the resource and status.exportPath from the trainer's summary (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from tabjob.api import parse_manifest
from tabjob.api.crdgen import crd
from tabjob.api.errors import SpecError
from tabjob.contracts.results import RunSummary
from tabjob.controller.policy.results import parse_summary, results_from_summary


def _doc(export: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"data": {"train": "sklearn://iris", "label": "target"}, "models": {"GBM": [{}]}}
    if export is not None:
        spec["export"] = export
    return {"apiVersion": "tabjob.dev/v1alpha1", "kind": "TabularJob", "metadata": {"name": "j"}, "spec": spec}


def test_export_is_off_unless_asked_and_mlserver_is_the_format() -> None:
    assert parse_manifest(_doc(None)).spec.export is None
    export = parse_manifest(_doc({})).spec.export
    assert export is not None and export.format == "mlserver"
    assert parse_manifest(_doc({"format": "mlserver"})).spec.export == export


def test_an_unknown_export_format_names_the_field() -> None:
    with pytest.raises(SpecError) as exc:
        parse_manifest(_doc({"format": "onnx"}))
    assert any("spec.export.format" in line and "mlserver" in line for line in exc.value.lines())


def test_the_crd_takes_spec_export_and_shows_status_export_path() -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    assert schema["spec"]["properties"]["export"]["properties"]["format"]["enum"] == ["mlserver"]
    assert schema["status"]["properties"]["exportPath"]["type"] == "string"


def test_the_summary_carries_the_export_path_into_status() -> None:
    summary = RunSummary(best_model="GBM", score=0.9, export_path="/output/adult/mlserver")
    parsed = parse_summary(summary.for_termination())
    assert parsed is not None and parsed.export_path == "/output/adult/mlserver"
    assert results_from_summary(parsed)["exportPath"] == "/output/adult/mlserver"
    assert "exportPath" not in results_from_summary(RunSummary(best_model="GBM", score=0.9))
