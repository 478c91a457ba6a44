"""docs/install.yaml is the current chart rendered with default values (regenerate: make chart-manifest)."""

from __future__ import annotations

import yaml

from hack.chart_tools import REPO
from hack.install_manifest import manifest

INSTALL = REPO / "docs" / "install.yaml"


def test_install_manifest_is_current() -> None:
    assert INSTALL.read_text() == manifest(), "docs/install.yaml is stale: run `make chart-manifest`"


def test_install_manifest_has_crds_first_and_no_helm_test() -> None:
    kinds = [d["kind"] for d in yaml.safe_load_all(INSTALL.read_text()) if d]
    assert kinds[:3] == ["Namespace", "CustomResourceDefinition", "CustomResourceDefinition"]
    assert kinds.count("CustomResourceDefinition") == 2  # TabularJob and TabularPrediction
    assert "Pod" not in kinds and "Deployment" in kinds
