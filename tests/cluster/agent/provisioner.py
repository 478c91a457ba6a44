"""A dynamic provisioner for PersistentVolumeClaims: one directory per claim under .cluster/volumes.

The default StorageClass `standard` names this provisioner; for each pending claim of that class the agent creates
a hostPath PersistentVolume pre-bound to the claim (the controller-manager's PV controller completes the binding),
and deletes the directory and the volume once the claim is gone (reclaimPolicy Delete), as an external
provisioner would.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from tests.cluster.kube import ApiError, Kube
from tests.cluster.paths import VOLUMES

log = logging.getLogger("agent.provisioner")

PROVISIONER = "tabjob.dev/local-dir"
STORAGE_CLASS = "standard"


def ensure_storage_class(kube: Kube) -> None:
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }
    try:
        kube.create("/apis/storage.k8s.io/v1/storageclasses", body)
    except ApiError as exc:
        if exc.status != 409:
            raise


def _provision(kube: Kube, pvc: dict[str, Any]) -> None:
    meta, spec = pvc["metadata"], pvc["spec"]
    path = VOLUMES / meta["namespace"] / f"{meta['name']}-{meta['uid'][:8]}"
    path.mkdir(parents=True, exist_ok=True)
    pv: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"pvc-{meta['uid']}", "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
        "spec": {
            "capacity": {"storage": spec.get("resources", {}).get("requests", {}).get("storage", "1Gi")},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": STORAGE_CLASS,
            "volumeMode": spec.get("volumeMode", "Filesystem"),
            "hostPath": {"path": str(path), "type": "Directory"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }
    try:
        kube.create("/api/v1/persistentvolumes", pv)
        log.info("provisioned %s for %s/%s", pv["metadata"]["name"], meta["namespace"], meta["name"])
    except ApiError as exc:
        if exc.status != 409:
            raise


def reconcile(kube: Kube) -> None:
    for pvc in kube.get("/api/v1/persistentvolumeclaims")["items"]:
        if (
            pvc["spec"].get("storageClassName") == STORAGE_CLASS
            and not pvc["spec"].get("volumeName")
            and pvc.get("status", {}).get("phase") == "Pending"
            and not pvc["metadata"].get("deletionTimestamp")
        ):
            _provision(kube, pvc)
    for pv in kube.get("/api/v1/persistentvolumes")["items"]:
        ours = pv["metadata"].get("annotations", {}).get("pv.kubernetes.io/provisioned-by") == PROVISIONER
        if ours and pv.get("status", {}).get("phase") in ("Released", "Failed"):
            shutil.rmtree(Path(pv["spec"]["hostPath"]["path"]), ignore_errors=True)
            kube.delete(f"/api/v1/persistentvolumes/{pv['metadata']['name']}")
