"""Small builders for the manifests the harness tests create."""

from __future__ import annotations

from typing import Any

from hack.cluster.images import TOOLBOX_IMAGE

# What Pod Security `restricted` asks of every container (the test namespaces enforce it).
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def toolbox_pod(name: str, *args: str, restart: str = "Never", **spec: Any) -> dict[str, Any]:
    """A one-container pod running `/toolbox ARGS...` (hack/cluster/tools/node/toolbox); extra keyword arguments
    go into the container or the pod spec."""
    container_keys = {"env", "resources", "terminationMessagePolicy", "volumeMounts"}
    container: dict[str, Any] = {
        "name": "main",
        "image": TOOLBOX_IMAGE,
        "imagePullPolicy": "Never",  # imported by the harness; there is no registry to pull from
        "args": list(args),
        "securityContext": RESTRICTED,
    }
    container.update({k: v for k, v in spec.items() if k in container_keys})
    pod_spec = {
        "restartPolicy": restart,
        "containers": [container],
        "terminationGracePeriodSeconds": 5,
        **{k: v for k, v in spec.items() if k not in container_keys},
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod_spec}


def terminated(pod_obj: dict[str, Any], container: str = "main") -> dict[str, Any]:
    status = next(s for s in pod_obj["status"]["containerStatuses"] if s["name"] == container)
    return status["state"]["terminated"]


def host_volume(pv: str, path: str, namespace: str, claim: str, node: str | None = None) -> list[dict[str, Any]]:
    """A hostPath PersistentVolume on `path` (a directory of this machine, which every node shares) and the claim
    `claim` in `namespace` bound to it both ways, so no provisioner is needed (the test bed has none). `node` pins
    the volume, and so its pods, to one node. The volume is cluster-scoped: the caller deletes it."""
    spec: dict[str, Any] = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "hostPath": {"path": path, "type": "Directory"},
        "claimRef": {"namespace": namespace, "name": claim},
    }
    if node is not None:
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv}, "spec": spec}
    claim_obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": pv,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    return [volume, claim_obj]
