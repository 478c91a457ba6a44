"""A queued job's place in its Kueue LocalQueue, from Kueue's visibility API (`tabjob status`; docs/kueue.md).

Kueue serves, through the API server's aggregation layer, the pending Workloads of a LocalQueue in the order its
ClusterQueue will consider them:

    GET /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/NS/localqueues/LQ/pendingworkloads

v0.17.0 serves v1beta2 and v1beta1 with the same shape; older releases only v1beta1. The answer is parsed into
`PendingWorkloadsSummary` (one spelling, Kueue's) and `position` finds the job's Workload in it: a pure function, so
what the CLI prints is decided without a cluster. A TabularJob's Workload is named after its pod group,
`<job>-<attempt>` (controller/policy/kueue.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from tabjob.contracts.pod import job_of_workload

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # newest first: the first one the API server serves is used


def pending_workloads_path(version: str, namespace: str, local_queue: str) -> str:
    return f"/apis/{GROUP}/{version}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"


class _Kueue(BaseModel):
    # Kueue adds fields between releases (ownerReferences, ...): ignore what we do not read, require what we do.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class WorkloadMeta(_Kueue):
    name: str
    namespace: str = ""


class PendingWorkload(_Kueue):
    """One pending Workload; Kueue's positions start from 0."""

    metadata: WorkloadMeta
    priority: int = 0
    local_queue_name: str = Field(alias="localQueueName")
    position_in_cluster_queue: int = Field(alias="positionInClusterQueue", ge=0)
    position_in_local_queue: int = Field(alias="positionInLocalQueue", ge=0)


class PendingWorkloadsSummary(_Kueue):
    """The answer of `.../localqueues/LQ/pendingworkloads`: at most `limit` (1000 by default) Workloads, in order."""

    items: list[PendingWorkload] = Field(default_factory=list)


@dataclass(frozen=True)
class QueuePosition:
    """Where the job's Workload stands, counted from 1 as a person counts a queue."""

    workload: str
    in_local_queue: int
    local_queue_pending: int  # pending Workloads in the answer, the job's included
    in_cluster_queue: int
    priority: int


def position(summary: PendingWorkloadsSummary, job: str, namespace: str) -> QueuePosition | None:
    """The position of `job`'s Workload among the pending ones, or None when it is not pending (admitted, finished,
    or its pods are not all created yet, so Kueue has no Workload for it). Should two attempts' Workloads both be
    pending for an instant, the newer attempt is the job's."""
    mine: list[tuple[int, PendingWorkload]] = []
    for item in summary.items:
        parsed = job_of_workload(item.metadata.name)
        if parsed and parsed[0] == job and item.metadata.namespace in ("", namespace):
            mine.append((parsed[1], item))
    if not mine:
        return None
    _, wl = max(mine, key=lambda m: m[0])
    return QueuePosition(
        workload=wl.metadata.name,
        in_local_queue=wl.position_in_local_queue + 1,
        local_queue_pending=len(summary.items),
        in_cluster_queue=wl.position_in_cluster_queue + 1,
        priority=wl.priority,
    )


def describe(queue: str, pos: QueuePosition | None, unavailable: str | None = None) -> str:
    """The one line `tabjob status` prints about the job's place in `queue`."""
    if unavailable is not None:
        return f"Position in LocalQueue {queue}: unknown (Kueue's visibility API did not answer: {unavailable})"
    if pos is None:
        return f"Position in LocalQueue {queue}: not pending (admitted, or Kueue has not created its Workload yet)"
    return (
        f"Position in LocalQueue {queue}: {pos.in_local_queue} of {pos.local_queue_pending} pending"
        f" ({pos.in_cluster_queue} in its ClusterQueue; Workload {pos.workload}, priority {pos.priority})"
    )
