"""The real scheduler places pods by the fake nodes' advertised resources, GPUs included."""

from __future__ import annotations

import pytest

from tests.cluster.fixtures import Cluster
from tests.cluster.manifests import pod

pytestmark = pytest.mark.e2e


def test_nodes_advertise_gpus_with_feature_discovery_labels(cluster: Cluster) -> None:
    nodes = {n["metadata"]["name"]: n for n in cluster.kube.get("/api/v1/nodes")["items"]}
    gpu_nodes = [n for n in nodes.values() if n["status"]["allocatable"].get("nvidia.com/gpu") == "4"]
    assert len(gpu_nodes) >= 2
    for node in gpu_nodes:
        labels = node["metadata"]["labels"]
        assert labels["nvidia.com/gpu.count"] == "4"
        assert labels["nvidia.com/gpu.product"] and int(labels["nvidia.com/gpu.memory"]) > 0
    assert any("nvidia.com/gpu" not in n["status"]["allocatable"] for n in nodes.values())
    for node in nodes.values():
        assert {"type": "Ready", "status": "True"}.items() <= next(
            c for c in node["status"]["conditions"] if c["type"] == "Ready"
        ).items()


def test_too_many_gpus_stays_pending_unschedulable(cluster: Cluster, namespace: str) -> None:
    cluster.apply(pod("greedy", "true", resources={"limits": {"nvidia.com/gpu": "8"}}), namespace)

    def unschedulable() -> dict[str, str] | None:
        conds = cluster.pod(namespace, "greedy").get("status", {}).get("conditions", [])
        return next((c for c in conds if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"), None)

    cond = cluster.wait_for("the scheduler to give up on the pod", unschedulable, timeout=30)
    assert "nvidia.com/gpu" in cond["message"]
    assert cluster.pod(namespace, "greedy")["status"]["phase"] == "Pending"
    assert not cluster.pod(namespace, "greedy")["spec"].get("nodeName")


def test_gpu_pod_lands_on_a_gpu_node(cluster: Cluster, namespace: str) -> None:
    cluster.apply(
        pod(
            "trainer",
            "echo cpus=$CPUS",
            resources={"limits": {"nvidia.com/gpu": "2", "cpu": "3"}},
            env=[{"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
        ),
        namespace,
    )
    done = cluster.wait_phase(namespace, "trainer", "Succeeded")
    node = cluster.kube.get(f"/api/v1/nodes/{done['spec']['nodeName']}")
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert cluster.kubectl("logs", "-n", namespace, "trainer").stdout == "cpus=3\n"


def test_gpu_product_node_selector(cluster: Cluster, namespace: str) -> None:
    product = "NVIDIA-H100-80GB-HBM3"
    cluster.apply(
        pod(
            "h100",
            "true",
            nodeSelector={"nvidia.com/gpu.product": product},
            resources={"limits": {"nvidia.com/gpu": "1"}},
        ),
        namespace,
    )
    done = cluster.wait_phase(namespace, "h100", "Succeeded")
    node = cluster.kube.get(f"/api/v1/nodes/{done['spec']['nodeName']}")
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == product
