"""How the operator keeps objects in memory: compact JSON, compressed against a dictionary of what they share.

Every job's cached objects (the job, its pods, its Workload, the children the builders made) repeat the same keys,
labels, pod template and condition texts, and differ in names, uids and a few values. zlib primed with a preset
dictionary of one typical job's objects (`zdict`) stores each of them as little more than those differences: the
children of a one-pod job take about a fifth of what plain zlib gives them. The dictionary is built once per
process from the builders themselves, so it follows every change to what they write, and nothing packed ever
leaves the process, so no two processes need the same one.
"""

from __future__ import annotations

import functools
import json
import zlib
from typing import Any

LEVEL = 6  # with a dictionary most of an object is a back-reference; higher levels buy little and cost time

# What the API server and the kubelet add to objects the builders write: a pod's and a job's status as they are
# observed, and the metadata every stored object carries.
_OBSERVED = {
    "metadata": {
        "uid": "00000000-0000-0000-0000-000000000000",
        "resourceVersion": "1000000",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "generation": 1,
    },
    "status": {
        "phase": "Pending",
        "conditions": [
            {"type": t, "status": "False", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:00Z"}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
        + [
            {"type": "Ready", "status": "False", "reason": "Pending", "message": "", "observedGeneration": 1},
            {"type": "Reconciling", "status": "True", "reason": "Unschedulable", "message": ""},
            {"type": "Stalled", "status": "False", "reason": "Progressing", "message": ""},
            {"type": "Admitted", "status": "False", "reason": "Queued", "message": ""},
        ],
        "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 "
        "nodes are available: 3 Preemption is not helpful for scheduling.",
        "reason": "Unschedulable",
        "qosClass": "Guaranteed",
        "hostIP": "198.19.0.1",
        "podIP": "10.0.0.1",
        "startTime": "2026-01-01T00:00:00Z",
        "containerStatuses": [
            {
                "name": "trainer",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {"waiting": {"reason": "ContainerCreating"}},
                "lastState": {},
                "image": "",
                "imageID": "",
            }
        ],
        "observedGeneration": 1,
        "restarts": 0,
        "requeues": 0,
        "plan": {},
    },
}


def _encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@functools.cache
def dictionary() -> bytes:
    """One typical job's objects as the builders write them, and what the cluster adds to them (at most 32 KiB,
    zlib's window: what is closest to the end is the cheapest to refer to, so the commonest parts go last)."""
    # Imported here: the builders and planner need not load for an operator that never packs (tests, tools).
    from tabjob import families
    from tabjob.api import OUTPUT_DIR, parse_manifest
    from tabjob.controller.config import Settings
    from tabjob.controller.policy.builders import JobRef, build_children
    from tabjob.planner import plan_job

    manifest = {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": "job", "namespace": "default"},
        "spec": {
            "data": {"train": "sklearn://breast_cancer", "label": "target"},
            "output": {"path": f"{OUTPUT_DIR}/job"},
            "resources": {"cpus": 2, "cpusPerPod": 1, "memory": "2Gi"},
            # Every family: each fit's hyperparameters carry its family's defaults, so each family's are common.
            "models": {key: [{}] for key in families.MODEL_KEYS},
            "bagging": {"folds": 2},
        },
    }
    job = parse_manifest(manifest)
    children = build_children(job, plan_job(job), JobRef("job", "default", "uid", 1), 0, Settings())
    sample = [_OBSERVED, manifest, children.service, children.configmap, children.pods]
    return _encode(sample)[-32768:]


@functools.cache
def _primed() -> tuple[Any, Any]:
    """A compressor and a decompressor primed with the dictionary; each use copies one (cheap, unlike priming)."""
    zdict = dictionary()
    return zlib.compressobj(LEVEL, zdict=zdict), zlib.decompressobj(zdict=zdict)


def pack(obj: Any) -> bytes:
    """`obj` as compact JSON, compressed against the dictionary."""
    compressor = _primed()[0].copy()
    return compressor.compress(_encode(obj)) + compressor.flush()


def unpack(raw: bytes) -> Any:
    decompressor = _primed()[1].copy()
    return json.loads(decompressor.decompress(raw) + decompressor.flush())
