"""The watch cache: the latest TabularJobs and their children as the watches deliver them, and `observe`, which
turns one job's share of it into the `Observed` that `decide` reads.

Children are filed by the job-name label, but a child counts as the job's own only when its controller's uid is the
job's uid: a job deleted and recreated under the same name never takes the old job's pods for its own.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from datetime import UTC, datetime
from typing import Any

from tabjob.api import ANNOTATION_GENERATION, LABEL_JOB
from tabjob.controller.config import Settings
from tabjob.controller.policy import kueue
from tabjob.controller.policy.builders import Children, configmap_name
from tabjob.controller.policy.decision import Observed
from tabjob.controller.runtime.packing import pack, unpack
from tabjob.controller.runtime.workqueue import Key

Desired = tuple[Children | None, dict[str, Any] | None, list[str]]


def slim(body: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps of an object: managedFields and kubectl's last-applied copy are most of its bytes."""
    meta = dict(body.get("metadata") or {})
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if annotations and "kubectl.kubernetes.io/last-applied-configuration" in annotations:
        meta["annotations"] = {
            k: v for k, v in annotations.items() if k != "kubectl.kubernetes.io/last-applied-configuration"
        }
    return {**body, "metadata": meta}


def slim_pod(body: dict[str, Any]) -> dict[str, Any]:
    """A pod as the reconciler reads it: metadata, status, and of the spec only the containers' ports (rank 0's
    progress port) and the node. The rest (env, volumes, security context) is most of a pod's bytes and is ours:
    the builders wrote it."""
    pod = slim(body)
    spec = pod.get("spec") or {}
    containers = [{"name": c.get("name"), "ports": c.get("ports") or []} for c in spec.get("containers") or []]
    pod["spec"] = {"containers": containers, "nodeName": spec.get("nodeName")}
    return pod


def slim_workload(body: dict[str, Any]) -> dict[str, Any]:
    """A Workload as admission reads it: its name, priority, queue and status (the pod sets' templates are most of
    its bytes, and are our pods')."""
    spec = body.get("spec") or {}
    return {
        "metadata": {k: body["metadata"].get(k) for k in ("name", "namespace", "uid", "ownerReferences")},
        "spec": {k: spec.get(k) for k in ("queueName", "priority", "priorityClassRef", "active")},
        "status": body.get("status") or {},
    }


class Packed(MutableMapping[Key, dict[str, Any]]):
    """A mapping whose values live packed (packing.py: compact JSON compressed against what jobs share) and are
    decoded on each read. Decoded into dicts
    and strings an object takes about four times its JSON (a one-pod job with its status: 13 KiB against 3 KiB), and
    a pass reads its job a few times at tens of microseconds each; a thousand idle jobs are mostly bytes, not dicts.
    Every read is a fresh copy, so nothing can change a cached object by accident."""

    def __init__(self) -> None:
        self._data: dict[Key, bytes] = {}

    def __getitem__(self, key: Key) -> dict[str, Any]:
        return unpack(self._data[key])

    def __setitem__(self, key: Key, value: dict[str, Any]) -> None:
        self._data[key] = pack(value)

    def __delitem__(self, key: Key) -> None:
        del self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[Key]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def resource_version(obj: dict[str, Any]) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


def owner_uid(obj: dict[str, Any]) -> str | None:
    """The uid of the object's controller: a child is ours only when it is the uid of *this* job, not of an
    earlier job of the same name."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


class Cache:
    def __init__(self) -> None:
        self.jobs = Packed()
        self.pods: dict[Key, dict[str, bytes]] = {}  # pod name -> slim_pod, packed
        self.configmaps: dict[Key, tuple[str | None, str | None]] = {}  # (owner uid, generation annotation)
        self.services: dict[Key, str | None] = {}  # owner uid
        # Kueue Workloads of queued jobs' pod groups, by (namespace, name): the group name is <job>-<attempt>.
        self.workloads: dict[Key, bytes] = {}

    def on_job(self, event_type: str | None, body: dict[str, Any]) -> Key:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if event_type == "DELETED":
            self.jobs.pop(key, None)
            self.pods.pop(key, None)
            self.configmaps.pop(key, None)
            self.services.pop(key, None)
            return key
        body = slim(body)
        cached = self.jobs.get(key)
        if (
            cached is None
            or resource_version(body) >= resource_version(cached)
            or cached["metadata"].get("uid") != body["metadata"]["uid"]
        ):
            self.jobs[key] = body
        return key

    def on_child(self, kind: str, event_type: str | None, body: dict[str, Any]) -> Key | None:
        """File a child under its job; the job's key when that job is cached (and so wants a pass)."""
        meta = body["metadata"]
        job = (meta.get("labels") or {}).get(LABEL_JOB)
        if not job:
            return None
        key = (meta["namespace"], job)
        gone = event_type == "DELETED"
        if kind == "Pod":
            pods = self.pods.setdefault(key, {})
            if gone:
                pods.pop(meta["name"], None)
                if not pods:
                    del self.pods[key]
            else:
                pods[meta["name"]] = pack(slim_pod(body))
        elif kind == "ConfigMap" and meta["name"] == configmap_name(job):
            if gone:
                self.configmaps.pop(key, None)
            else:
                self.configmaps[key] = (owner_uid(body), (meta.get("annotations") or {}).get(ANNOTATION_GENERATION))
        elif kind == "Service" and meta["name"] == job:
            if gone:
                self.services.pop(key, None)
            else:
                self.services[key] = owner_uid(body)
        return key if key in self.jobs else None

    def on_workload(self, event_type: str | None, body: dict[str, Any]) -> Key | None:
        """File a Workload by name; the key of the job whose pod group it may be, when that job is cached."""
        meta = body["metadata"]
        wkey = (meta["namespace"], meta["name"])
        if event_type == "DELETED":
            self.workloads.pop(wkey, None)
        else:
            self.workloads[wkey] = pack(slim_workload(body))
        found = kueue.job_of_workload(meta["name"])
        key = (meta["namespace"], found[0]) if found else None
        return key if key in self.jobs else None

    def workload_of(self, key: Key, job: dict[str, Any]) -> dict[str, Any] | None:
        """The Workload of the job's current pod group, if Kueue has created it."""
        name = kueue.group_name(key[1], kueue.attempt_of(job.get("status") or {}))
        raw = self.workloads.get((key[0], name))
        return None if raw is None else unpack(raw)

    def pods_of(self, key: Key) -> list[dict[str, Any]]:
        return [unpack(raw) for raw in self.pods.get(key, {}).values()]

    def set_pods(self, key: Key, pods: list[dict[str, Any]]) -> None:
        """Replace the job's cached pods with a fresh list (the API server's, not the watch's)."""
        self.pods[key] = {p["metadata"]["name"]: pack(slim_pod(p)) for p in pods}

    def observe(
        self, job: dict[str, Any], desired: Desired, pods: list[dict[str, Any]], settings: Settings, **extra: Any
    ) -> Observed:
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        uid = job["metadata"]["uid"]
        children, plan_json, problems = desired
        foreign = [p["metadata"]["name"] for p in pods if owner_uid(p) != uid]
        cm_owner, cm_gen = self.configmaps.get(key, (None, None))
        if key in self.configmaps and cm_owner != uid:
            foreign.append(configmap_name(key[1]))
        if key in self.services and self.services[key] != uid:
            foreign.append(key[1])
        return Observed(
            job=job,
            desired=children,
            plan_json=plan_json,
            spec_problems=problems,
            pods=[p for p in pods if owner_uid(p) == uid],
            have_configmap=key in self.configmaps,
            have_service=key in self.services,
            now=datetime.now(UTC),
            settings=settings,
            configmap_stale=cm_owner == uid and cm_gen != str(job["metadata"].get("generation") or 1),
            foreign=foreign,
            **extra,
        )
