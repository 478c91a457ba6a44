"""Small builders for the manifests the harness tests create."""

from __future__ import annotations

from typing import Any


def pod(name: str, script: str, *, restart: str = "Never", **spec: Any) -> dict[str, Any]:
    """A one-container pod running `sh -c script`; extra keyword arguments go into the container or pod spec."""
    container_keys = {"env", "envFrom", "volumeMounts", "resources", "terminationMessagePolicy", "workingDir"}
    container: dict[str, Any] = {"name": "main", "image": "ignored.local/none", "command": ["sh", "-c", script]}
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
