"""examples/kustomize: each kustomization builds with the project's kubectl, its TabularJobs pass `tabjob validate`
(schema and planner), the Argo CD one carries docs/argocd-health.lua unchanged, and the built objects pass the API
server's validation (`--dry-run=server`, in a throwaway namespace)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from hack.chart_tools import REPO, kubectl

EXAMPLES = REPO / "examples" / "kustomize"
BUILDS = ["base", "overlays/gpu", "argocd"]


def build(path: str) -> list[dict]:
    proc = subprocess.run([kubectl(), "kustomize", str(EXAMPLES / path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.mark.parametrize("path", ["base", "overlays/gpu"])
def test_jobs_validate(path: str, tmp_path: Path) -> None:
    jobs = [d for d in build(path) if d["kind"] == "TabularJob"]
    assert len(jobs) == 1
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(jobs[0]))
    proc = subprocess.run([sys.executable, "-m", "tabjob", "validate", str(manifest)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_overlay_changes_what_it_says() -> None:
    (ns,) = [d for d in build("overlays/gpu") if d["kind"] == "Namespace"]
    (job,) = [d for d in build("overlays/gpu") if d["kind"] == "TabularJob"]
    assert ns["metadata"]["name"] == job["metadata"]["namespace"] == "ml-team-a"
    assert job["metadata"]["name"] == "team-a-breast-cancer" and job["metadata"]["labels"]["team"] == "a"
    assert job["spec"]["resources"]["gpus"] == 1 and job["spec"]["image"].endswith(":0.1.0")


def test_argocd_health_is_the_documented_one() -> None:
    (cm,) = build("argocd")
    assert cm["metadata"] == {
        "name": "argocd-cm",
        "namespace": "argocd",
        "labels": {"app.kubernetes.io/name": "argocd-cm", "app.kubernetes.io/part-of": "argocd"},
    }
    key = "resource.customizations.health.tabjob.dev_TabularJob"
    assert cm["data"][key] == (REPO / "docs" / "argocd-health.lua").read_text()


@pytest.mark.e2e
@pytest.mark.usefixtures("crds_installed")
@pytest.mark.parametrize("path", BUILDS)
def test_built_objects_pass_server_validation(path: str, kube_env: dict[str, str]) -> None:
    ns = f"kustomize-{uuid.uuid4().hex[:6]}"
    subprocess.run([kubectl(), "create", "namespace", ns], env=kube_env, check=True, capture_output=True)
    try:
        docs = [d for d in build(path) if d["kind"] != "Namespace"]
        for d in docs:
            d["metadata"]["namespace"] = ns
        proc = subprocess.run(
            [kubectl(), "apply", "--server-side", "--dry-run=server", "-f", "-"],
            env=kube_env,
            input=yaml.safe_dump_all(docs),
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("serverside-applied (server dry run)") == len(docs), proc.stdout
    finally:
        subprocess.run([kubectl(), "delete", "namespace", ns, "--wait=false"], env=kube_env, capture_output=True)
