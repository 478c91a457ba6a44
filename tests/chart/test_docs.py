"""The YAML people copy from the docs parses, and the TabularJobs in it are valid."""

from __future__ import annotations

import re

import pytest
import yaml

from hack.chart_tools import REPO

DOCS = ["docs/gitops.md", "docs/upgrading-crds.md", "charts/tabjob/README.md", "examples/kustomize/README.md"]


def _yaml_blocks(path: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", (REPO / path).read_text(), re.DOTALL)


@pytest.mark.parametrize("path", DOCS)
def test_yaml_blocks_parse(path: str) -> None:
    for block in _yaml_blocks(path):
        docs = [d for d in yaml.safe_load_all(block) if d]
        assert docs, block
        for d in docs:
            # A fragment (like an ignoreDifferences entry) is a mapping too; whole objects name their kind.
            assert isinstance(d, dict), block
            if "apiVersion" in d:
                assert d.get("kind") and d.get("metadata", {}).get("name"), block


def test_argocd_snippet_is_a_configmap_with_the_health_key() -> None:
    (cm,) = [
        d for b in _yaml_blocks("docs/gitops.md") for d in yaml.safe_load_all(b) if d and d.get("kind") == "ConfigMap"
    ]
    assert (
        cm["data"]["resource.customizations.health.tabjob.dev_TabularJob"]
        == (REPO / "docs" / "argocd-health.lua").read_text()
    )
