"""The nodes are real kubelets over containerd, and GPUs reach them through the device-plugin API."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hack.cluster.manifests import toolbox_pod
from hack.cluster.nodes import NODES, node_dir
from tests.cluster.fixtures import Cluster

pytestmark = pytest.mark.e2e


def _node(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict(cluster.kube.get(f"/api/v1/nodes/{name}"))


def test_three_ready_kubelets_over_containerd(cluster: Cluster) -> None:
    items = {n["metadata"]["name"]: n for n in cluster.kube.get("/api/v1/nodes")["items"]}
    assert set(items) == {"gpu-node-1", "gpu-node-2", "cpu-node-1"}
    for spec in NODES:
        node = items[spec.name]
        info = node["status"]["nodeInfo"]
        assert info["kubeletVersion"] == "v1.35.4"
        assert info["containerRuntimeVersion"].startswith("containerd://"), info
        assert cluster.node_ready(spec.name)
        (ip,) = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
        assert ip == cluster.net.node_ip(spec.index)
        for key, value in spec.labels.items():  # GPU Feature Discovery's labels
            assert node["metadata"]["labels"][key] == value


def test_gpus_are_allocatable_from_the_device_plugin(cluster: Cluster) -> None:
    alloc = {spec.name: _node(cluster, spec.name)["status"]["allocatable"] for spec in NODES}
    assert alloc["gpu-node-1"]["nvidia.com/gpu"] == "4"
    assert alloc["gpu-node-2"]["nvidia.com/gpu"] == "4"
    assert alloc["gpu-node-2"]["nvidia.com/mig-1g.10gb"] == "2"
    assert not any(k.startswith("nvidia.com/") for k in alloc["cpu-node-1"])


def test_gpu_pods_get_disjoint_devices_through_allocate(cluster: Cluster, namespace: str) -> None:
    a100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    for name in ("two-a", "two-b"):
        cluster.apply(
            toolbox_pod(name, "env", nodeSelector=a100, resources={"limits": {"nvidia.com/gpu": "2"}}), namespace
        )
    mig = toolbox_pod("mig", "env", resources={"limits": {"nvidia.com/mig-1g.10gb": "1"}})
    cluster.apply(mig, namespace)
    seen: dict[str, list[str]] = {}
    for name in ("two-a", "two-b", "mig"):
        pod = cluster.wait_phase(namespace, name, "Succeeded")
        env = dict(line.split("=", 1) for line in cluster.kubectl("logs", "-n", namespace, name).stdout.splitlines())
        seen[name] = env["NVIDIA_VISIBLE_DEVICES"].split(",")
        # What CUDA enumerates in a real container, where the toolkit mounts only the allocated devices: 0..n-1.
        assert env["CUDA_VISIBLE_DEVICES"] == ",".join(str(i) for i in range(len(seen[name]))), env
        expected_node = "gpu-node-2" if name == "mig" else "gpu-node-1"
        assert pod["spec"]["nodeName"] == expected_node
    assert len(seen["two-a"]) == len(seen["two-b"]) == 2
    assert not set(seen["two-a"]) & set(seen["two-b"]), seen  # the kubelet's accounting, not the scheduler's
    assert all(d.startswith("GPU-gpu-node-1-gpu-") for d in seen["two-a"] + seen["two-b"])
    assert len(seen["mig"]) == 1 and seen["mig"][0].startswith("MIG-gpu-node-2-mig-1g.10gb-")


def test_more_gpus_than_a_node_has_stays_unschedulable(cluster: Cluster, namespace: str) -> None:
    cluster.apply(toolbox_pod("five", "env", resources={"limits": {"nvidia.com/gpu": "5"}}), namespace)

    def unschedulable() -> str | None:
        for c in cluster.pod(namespace, "five")["status"].get("conditions", []):
            if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
                return str(c["message"])
        return None

    assert "nvidia.com/gpu" in cluster.wait_for("an Unschedulable condition", unschedulable, timeout=30)


def test_an_unhealthy_device_leaves_allocatable(cluster: Cluster) -> None:
    health = node_dir("gpu-node-1") / "health"

    def allocatable() -> str:
        return str(_node(cluster, "gpu-node-1")["status"]["allocatable"]["nvidia.com/gpu"])

    try:
        health.write_text("GPU-gpu-node-1-gpu-3\n")  # what an XID error makes NVIDIA's plugin report
        cluster.wait_for("allocatable 3", lambda: allocatable() == "3", timeout=60)
    finally:
        health.write_text("")
    cluster.wait_for("allocatable 4 again", lambda: allocatable() == "4", timeout=60)
    assert json.loads(json.dumps(_node(cluster, "gpu-node-1")["status"]["capacity"]))["nvidia.com/gpu"] == "4"
