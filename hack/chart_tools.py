"""The tools the chart checks run: helm and kubectl from the local control plane's cached build, and checkov.

checkov pins packaging<24 and botocore pins python-dateutil<3, which clash with the project's own dependencies, so
it lives in its own virtualenv under ~/.cache/tabjob/tools (keyed by version, like the cluster's binaries) instead of
the dev extra. `python -m hack.chart_tools` (or `make chart-tools`) creates it; the checkov test does too.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "tabjob"
CHECKOV_VERSION = "3.3.30"
TOOLS = Path(os.environ.get("TABJOB_TOOLS_DIR", Path.home() / ".cache" / "tabjob" / "tools"))


def _cluster_bins() -> dict[str, Path]:
    from hack.cluster.controlplane import binaries

    return binaries(build=True)  # cached after the first build; the e2e tests need the same binaries


# The harness's pinned builds, not whatever is on PATH: a system kubectl may be years older than the API server.
@functools.cache
def helm() -> str:
    return str(_cluster_bins()["HELM_BIN"] / "helm")


@functools.cache
def kubectl() -> str:
    return str(_cluster_bins()["K8S_BIN"] / "kubectl")


def checkov() -> Path:
    venv = TOOLS / f"checkov-{CHECKOV_VERSION}"
    exe = venv / "bin" / "checkov"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"checkov=={CHECKOV_VERSION}"], check=True)
    return exe


def render(*args: str, namespace: str = "tabjob-system", release: str = "t") -> str:
    """`helm template` of the chart; extra args are helm's (--set, -f, --include-crds, ...)."""
    proc = subprocess.run(
        [helm(), "template", release, str(CHART), "-n", namespace, *args], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RenderError(proc.stderr)
    return proc.stdout


def objects(*args: str, **kw: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(render(*args, **kw)) if d]


# Every non-default option at once: listed namespaces (Roles instead of a ClusterRole), Lease settings, extra
# env, digests, scheduling knobs, monitors off (the local cluster has no prometheus-operator CRDs; they are rendered
# with --api-versions in test_chart_render.py instead).
NON_DEFAULT = [
    "--set",
    "watchNamespaces={tj-a,tj-b}",
    "--set",
    "replicaCount=3",
    "--set",
    "leaderElection.leaseName=tabjob-ha,leaderElection.leaseDuration=30,leaderElection.renewDeadline=20",
    "--set",
    "operator.verbose=true,operator.healthPort=8181,operator.apiQps=5",
    "--set",
    "operator.extraEnv[0].name=EXTRA",
    "--set-string",
    "operator.extraEnv[0].value=1",
    "--set",
    "image.digest=sha256:" + "a" * 64,
    "--set",
    "trainer.image.tag=0.1.0-cuda,trainer.runAsUser=2000,trainer.rendezvousPort=29600",
    "--set",
    "metrics.port=9191,metrics.service.port=9191",
    "--set",
    "serviceAccount.name=tabjob-sa",
    "--set",
    "priorityClassName=system-cluster-critical",
    "--set",
    "nodeSelector.kubernetes\\.io/os=linux",
    "--set-string",
    "networkPolicy.from[0].namespaceSelector.matchLabels.monitoring=true",
    "--set",
    "policy.serviceAccounts={default,s3-reader},policy.maxResources.cpus=64",
]


class RenderError(Exception):
    pass


if __name__ == "__main__":
    print(checkov())
