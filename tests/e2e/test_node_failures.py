"""Failures only a real node brings (its own kubelet): an image no registry has, and a node whose kubelet stops.

The e2e operator runs with TABJOB_IMAGE_PULL_TIMEOUT=30 and TABJOB_LOST_POD_TIMEOUT=20 (tests/e2e/conftest.py);
the test cluster marks a silent node NotReady after 20 s and evicts its pods 30 s later (hack/cluster/README.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator
from tests.e2e.jobs import job, pods, slow_job, status, wait_condition, wait_phase

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
# 2 GiB a pod: with memory limits enforced by cgroups, the NN_TORCH job's 512 MiB pods are OOMKilled.
ROOMY = {"cpus": 2, "cpusPerPod": 1, "memory": "4Gi"}


def test_an_image_that_cannot_be_pulled_fails_the_job_naming_it(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    image = "localhost/tabjob/no-such-trainer:0.0.0"
    cluster.apply(job("pull", image=image), namespace)
    # Pending while the kubelet retries the pull, then Failed once the operator's bounded wait runs out.
    st = wait_phase(cluster, namespace, "pull", "Failed", timeout=240)
    said = [st.get("message") or ""] + [c.get("message") or "" for c in st.get("conditions") or []]
    assert any(image in m for m in said), json.dumps(st, indent=1)
    reasons = {c.get("reason") for c in st.get("conditions") or []}
    assert reasons & {"ErrImagePull", "ImagePullBackOff"}, json.dumps(st, indent=1)


@pytest.fixture
def lose_node(cluster: Cluster) -> Iterator[list[str]]:
    """Stop the kubelets of the nodes named in the list the test fills in; start them again afterwards."""
    stopped: list[str] = []
    yield stopped
    for node in stopped:
        cluster.start_kubelet(node)
    for node in stopped:
        cluster.wait_for(f"{node} Ready again", lambda n=node: cluster.node_ready(n), timeout=120)  # type: ignore[misc]


def _lose_a_running_rank(cluster: Cluster, namespace: str, name: str, stopped: list[str]) -> set[str]:
    """Stop the kubelet of the node that runs rank 1; returns the job's pods on that node. Rank 0 may share it (the
    nodes have 2 CPUs each and the pods ask for 1), and then either pod may be the failure the job reports."""
    wait_phase(cluster, namespace, name, "Running", timeout=180)
    group = pods(cluster, namespace, name)
    rank1 = next(p for p in group if p["metadata"]["labels"]["tabjob.dev/rank"] == "1")
    node = str(rank1["spec"]["nodeName"])
    stopped.append(node)
    cluster.stop_kubelet(node)
    return {str(p["metadata"]["name"]) for p in group if p["spec"].get("nodeName") == node}


def test_a_lost_node_retries_the_group_within_its_backoff_limit(
    cluster: Cluster, operator: Operator, namespace: str, lose_node: list[str]
) -> None:
    cluster.apply(slow_job("lost", resources=ROOMY, runPolicy={"backoffLimit": 2}), namespace)
    lost_pods = _lose_a_running_rank(cluster, namespace, "lost", lose_node)
    st = cluster.wait_for(
        "a retry after the node was lost",
        lambda: s if (s := status(cluster, namespace, "lost")).get("restarts", 0) >= 1 else None,
        timeout=300,
    )
    assert any(p in (st.get("lastFailure") or "") for p in lost_pods), (lost_pods, json.dumps(st, indent=1))
    st = wait_condition(cluster, namespace, "lost", "Succeeded", timeout=600)
    assert st["restarts"] >= 1


def test_a_lost_node_fails_a_job_without_retries(
    cluster: Cluster, operator: Operator, namespace: str, lose_node: list[str]
) -> None:
    cluster.apply(slow_job("once", resources=ROOMY, runPolicy={"backoffLimit": 0}), namespace)
    lost_pods = _lose_a_running_rank(cluster, namespace, "once", lose_node)
    st = wait_phase(cluster, namespace, "once", "Failed", timeout=300)
    said = [st.get("message") or "", st.get("lastFailure") or ""]
    said += [c.get("message") or "" for c in st.get("conditions") or []]
    assert any(p in m for m in said for p in lost_pods), (lost_pods, json.dumps(st, indent=1))
    assert st.get("restarts", 0) == 0
