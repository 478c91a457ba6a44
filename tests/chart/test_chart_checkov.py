"""checkov's Kubernetes checks on the rendered chart: every failed check is one of those explained below, each
explanation is still needed, and the digest option really clears the digest check.

The same list, in prose, is in charts/tabjob/README.md ("Security scan").
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hack.chart_tools import NON_DEFAULT, checkov, render

# (check id, kind of the failing resource) -> why the chart keeps it that way.
EXPLAINED = {
    ("CKV_K8S_43", "Deployment"): "image by digest: the default is the tag equal to appVersion (immutable releases); "
    "set image.digest to pin by content (the non-default scan does, and passes)",
    ("CKV_K8S_43", "Pod"): "the helm test pod uses the operator image, so it follows image.digest the same way",
    ("CKV_K8S_15", "Deployment"): "pullPolicy IfNotPresent: release tags are never rewritten, and Always would "
    "make every restart depend on the registry; set image.pullPolicy=Always if yours are",
    ("CKV_K8S_15", "Pod"): "the helm test pod follows image.pullPolicy",
    ("CKV_K8S_38", "Deployment"): "the operator talks to the API server: it needs its ServiceAccount token",
    ("CKV_K8S_38", "Pod"): "the helm test pod lists EndpointSlices through the API (its own Role, list only)",
    ("CKV_K8S_8", "Pod"): "the helm test pod runs once to completion; a liveness probe has nothing to watch",
    ("CKV_K8S_9", "Pod"): "the helm test pod runs once to completion; nothing routes traffic to it",
}


def _scan(tmp_path: Path, name: str, values: list[str]) -> list[tuple[str, str, str]]:
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(render("--include-crds", *values))
    # --skip-download: no calls to the vendor's platform (this machine has no network beyond package registries).
    proc = subprocess.run(
        [str(checkov()), "-f", str(manifest), "--framework", "kubernetes", "-o", "json", "--quiet", "--skip-download"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode in (0, 1), proc.stderr  # 1: some check failed; judged below
    report = json.loads(proc.stdout)
    failed = report["results"]["failed_checks"] if isinstance(report, dict) else []
    return [(c["check_id"], c["resource"].split(".")[0], c["resource"]) for c in failed]


@pytest.mark.slow
@pytest.mark.parametrize("values", [[], NON_DEFAULT], ids=["default", "non-default"])
def test_every_failed_check_is_explained(tmp_path: Path, values: list[str]) -> None:
    failed = _scan(tmp_path, "chart", values)
    unexplained = [f"{cid} on {res}" for cid, kind, res in failed if (cid, kind) not in EXPLAINED]
    assert not unexplained, "checkov checks failing with no explanation: " + ", ".join(unexplained)


@pytest.mark.slow
def test_explanations_are_still_needed_and_digest_clears_its_check(tmp_path: Path) -> None:
    default = {(cid, kind) for cid, kind, _ in _scan(tmp_path, "default", [])}
    assert default == set(EXPLAINED), f"stale explanations: {set(EXPLAINED) - default}"
    pinned = {
        (cid, kind)
        for cid, kind, _ in _scan(
            tmp_path, "pinned", ["--set", "image.digest=sha256:" + "b" * 64, "--set", "image.pullPolicy=Always"]
        )
    }
    assert not pinned & {("CKV_K8S_43", "Deployment"), ("CKV_K8S_15", "Deployment")}
