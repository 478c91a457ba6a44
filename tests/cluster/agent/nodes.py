"""The fake nodes: what they advertise, and the heartbeats that keep them Ready.

Two GPU nodes advertise `nvidia.com/gpu: 4` with the labels NVIDIA's GPU feature discovery would set; one node
is CPU-only. All share the InternalIP 127.0.0.1 and differ by their kubelet port, which is where the API server
sends `kubectl logs`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from tests.cluster.kube import ApiError, Kube

LEASE_SECONDS = 40
KUBELET_VERSION = "v1.35.4"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    cpu: str
    memory: str
    gpus: int = 0
    labels: dict[str, str] = field(default_factory=dict)


def _gpu_labels(product: str, memory_mib: int, count: int) -> dict[str, str]:
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": str(memory_mib),
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.family": "ampere" if "A100" in product else "hopper",
    }


NODES: list[NodeSpec] = [
    NodeSpec("gpu-node-1", cpu="16", memory="64Gi", gpus=4, labels=_gpu_labels("NVIDIA-A100-SXM4-40GB", 40960, 4)),
    NodeSpec("gpu-node-2", cpu="16", memory="64Gi", gpus=4, labels=_gpu_labels("NVIDIA-H100-80GB-HBM3", 81559, 4)),
    NodeSpec("cpu-node-1", cpu="8", memory="32Gi"),
]


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rfc3339() -> str:
    return now().strftime("%Y-%m-%dT%H:%M:%SZ")


def _resources(spec: NodeSpec) -> dict[str, str]:
    res = {"cpu": spec.cpu, "memory": spec.memory, "pods": "110", "ephemeral-storage": "100Gi"}
    if spec.gpus:
        res["nvidia.com/gpu"] = str(spec.gpus)
    return res


def _conditions() -> list[dict[str, Any]]:
    t = rfc3339()
    ok = {
        "MemoryPressure": "KubeletHasSufficientMemory",
        "DiskPressure": "KubeletHasNoDiskPressure",
        "PIDPressure": "KubeletHasSufficientPID",
    }
    conds = [
        {
            "type": k,
            "status": "False",
            "reason": v,
            "lastHeartbeatTime": t,
            "lastTransitionTime": t,
            "message": "emulated by tests/cluster node agent",
        }
        for k, v in ok.items()
    ]
    conds.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "lastHeartbeatTime": t,
            "lastTransitionTime": t,
            "message": "tests/cluster node agent is posting ready status",
        }
    )
    return conds


def node_status(spec: NodeSpec, kubelet_port: int) -> dict[str, Any]:
    return {
        "capacity": _resources(spec),
        "allocatable": _resources(spec),
        "conditions": _conditions(),
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": spec.name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        "nodeInfo": {
            "machineID": spec.name,
            "systemUUID": spec.name,
            "bootID": spec.name,
            "kernelVersion": "",
            "osImage": "tabjob test node (processes, no containers)",
            "containerRuntimeVersion": "tabjob-agent://1",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def register(kube: Kube, spec: NodeSpec, kubelet_port: int) -> None:
    """Create (or take over) the Node and post its status."""
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "tabjob-gpu-4" if spec.gpus else "tabjob-cpu",
        **spec.labels,
    }
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": spec.name, "labels": labels}, "spec": {}}
    try:
        kube.create("/api/v1/nodes", body)
    except ApiError as exc:
        if exc.status != 409:
            raise
        kube.patch(f"/api/v1/nodes/{spec.name}", {"metadata": {"labels": labels}})
    kube.patch(f"/api/v1/nodes/{spec.name}/status", {"status": node_status(spec, kubelet_port)})


def renew_lease(kube: Kube, spec: NodeSpec) -> None:
    """Node liveness as kubelet reports it: a Lease in kube-node-lease, renewed every few seconds."""
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    lease_spec = {
        "holderIdentity": spec.name,
        "leaseDurationSeconds": LEASE_SECONDS,
        "renewTime": now().strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    try:
        kube.patch(f"{path}/{spec.name}", {"spec": lease_spec})
    except ApiError as exc:
        if exc.status != 404:
            raise
        kube.create(path, {"metadata": {"name": spec.name, "namespace": "kube-node-lease"}, "spec": lease_spec})


def heartbeat(kube: Kube, spec: NodeSpec) -> None:
    """Refresh lastHeartbeatTime only; the strategic merge keys conditions by type, transitions stay put."""
    t = rfc3339()
    conds = [{"type": c, "lastHeartbeatTime": t} for c in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")]
    kube.patch(f"/api/v1/nodes/{spec.name}/status", {"status": {"conditions": conds}})
