"""Fixtures for the chart checks that need the local control plane (tests/cluster): a kubeconfig, the chart's
CRDs installed for real, and namespaces that enforce the `restricted` Pod Security level."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hack.chart_tools import CHART, kubectl
from hack.cluster.wait import wait_condition


@pytest.fixture(scope="session")
def kube_env(cluster: Any) -> dict[str, str]:
    """The environment kubectl and helm need: KUBECONFIG of the local control plane (the harness's session
    fixture starts it, or reuses a running `make cluster`)."""
    return {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}


def run(env: dict[str, str], *argv: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def crds_installed(kube_env: dict[str, str]) -> None:
    # What `helm install` does with crds/; server-side apply is idempotent, so concurrent sessions do not clash.
    run(kube_env, kubectl(), "apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    wait_condition([kubectl()], "crd/tabularjobs.tabjob.dev", "Established", env=kube_env)


@pytest.fixture
def restricted_namespaces(kube_env: dict[str, str]) -> Iterator[Callable[[str], str]]:
    """make(prefix) -> a fresh namespace that enforces and warns at the restricted level; all removed after."""
    made: list[str] = []

    def make(prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        manifest = (
            f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:\n"
            "    pod-security.kubernetes.io/enforce: restricted\n"
            "    pod-security.kubernetes.io/warn: restricted\n"
        )
        run(kube_env, kubectl(), "apply", "-f", "-", stdin=manifest)
        made.append(name)
        return name

    yield make
    for name in made:
        run(kube_env, kubectl(), "delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
