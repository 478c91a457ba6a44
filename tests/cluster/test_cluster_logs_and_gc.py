"""`kubectl logs` through the API server to the node agent's kubelet endpoint; garbage collection of owned pods."""

from __future__ import annotations

import subprocess

import pytest

from tests.cluster.fixtures import Cluster
from tests.cluster.manifests import pod

pytestmark = pytest.mark.e2e


def test_kubectl_logs_shows_output(cluster: Cluster, namespace: str) -> None:
    cluster.apply(pod("talker", "for i in 1 2 3; do echo line $i; done; echo to-stderr >&2"), namespace)
    cluster.wait_phase(namespace, "talker", "Succeeded")
    out = cluster.kubectl("logs", "-n", namespace, "talker").stdout
    assert out.splitlines() == ["line 1", "line 2", "line 3", "to-stderr"]
    assert cluster.kubectl("logs", "-n", namespace, "talker", "--tail=1").stdout == "to-stderr\n"


def test_kubectl_logs_follow_streams_until_exit(cluster: Cluster, namespace: str) -> None:
    cluster.apply(pod("slow", "for i in 1 2 3; do echo tick $i; sleep 0.5; done"), namespace)
    cluster.wait_phase(namespace, "slow", "Running")
    proc = subprocess.run(
        [str(cluster.kubectl_path), f"--kubeconfig={cluster.kubeconfig}", "logs", "-f", "-n", namespace, "slow"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.stdout.splitlines() == ["tick 1", "tick 2", "tick 3"]


def test_deleting_the_owner_garbage_collects_its_pods(cluster: Cluster, namespace: str) -> None:
    cluster.apply(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "work"},
            "spec": {
                "parallelism": 2,
                "completions": 2,
                "backoffLimit": 0,
                "template": {"spec": pod("x", "sleep 300")["spec"]},
            },
        },
        namespace,
    )
    job_pods = f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3Dwork"
    cluster.wait_for(
        "the Job's two pods to run",
        lambda: len([p for p in cluster.kube.get(job_pods)["items"] if p["status"].get("phase") == "Running"]) == 2,
    )
    # Background propagation: the Job goes at once and the garbage collector removes the pods it owned.
    cluster.kubectl("delete", "job", "-n", namespace, "work", "--cascade=background", "--wait=false")
    cluster.wait_for(
        "the garbage collector to remove the Job's pods", lambda: cluster.kube.get(job_pods)["items"] == [], timeout=60
    )
