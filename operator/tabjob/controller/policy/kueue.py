"""Kueue admission, read from the job's Workload and pods: pure functions of plain dicts.

A job that names `spec.scheduling.queueName` is a Kueue pod group (builders.py writes the labels): Kueue's webhook
gates each pod, Kueue creates the group's Workload (named after the group) once every pod of the group exists,
admits the group all at once by removing the gates, and on eviction (preemption, waitForPodsReady) marks each pod
with a `TerminationTarget` condition and deletes it.

Each group is admitted once. Its pods carry `kueue.x-k8s.io/retriable-in-group: "false"`, so once none of them runs
Kueue finishes the group's Workload and releases its quota; an evicted job comes back as a new group (the next
attempt's pod names and group name) without counting a restart, as a failure would. That keeps Kueue's replacement
rules for a group (a pod created while the one it replaces is still terminating is deleted as excess) out of the way.

`observe` turns what is seen into a `QueueState`; `admitted_condition` into the job's `Admitted` condition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The group's name and its inverse are the pod contract's (contracts/pod.py), with the pods' Kueue labels: the
# builders label the pods with it, the cache and admission find the Workload by it.
from tabjob.contracts.pod import group_name as group_name
from tabjob.contracts.pod import job_of_workload as job_of_workload
from tabjob.controller.policy.conditions import condition

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
PLURAL = "workloads"
TERMINATION_TARGET = "TerminationTarget"  # the pod condition Kueue sets on each pod it stops
ADMITTED = "Admitted"  # the job's condition type
# The reasons Kueue's pod integration writes when it stops a group's pods. For a pod group (a composable job) an
# eviction's reason is "WorkloadEvictedDueTo" + the Workload's Evicted reason (Preempted, PodsReadyTimeout, ...), so
# these are prefixes.
EVICTED_BY_KUEUE = ("WorkloadEvicted", "NotAdmitted", "NoMatchingWorkload", "WorkloadDeleted")


def queue_name(spec: dict[str, Any]) -> str | None:
    return (spec.get("scheduling") or {}).get("queueName") or None


def attempt_of(status: dict[str, Any]) -> int:
    """The attempt the current pods belong to: every failure (a restart) and every eviction starts a new one."""
    return int(status.get("restarts") or 0) + int(status.get("requeues") or 0)


@dataclass(frozen=True)
class QueueState:
    """Where a queued job stands: `reason` is Admitted, Queued, Inadmissible or Preempted."""

    reason: str
    message: str
    evicted: bool = False  # Kueue is stopping (or has stopped) this attempt's pods: not a failure

    @property
    def admitted(self) -> bool:
        return self.reason == ADMITTED


def _conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c.get("type", ""): c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def _true(conds: dict[str, dict[str, Any]], ctype: str) -> bool:
    return conds.get(ctype, {}).get("status") == "True"


def pod_eviction(pods: list[dict[str, Any]]) -> str | None:
    """Kueue's message when it stops these pods (the TerminationTarget condition it writes before deleting)."""
    for pod in pods:
        for c in (pod.get("status") or {}).get("conditions") or []:
            mine = c.get("type") == TERMINATION_TARGET and str(c.get("reason") or "").startswith(EVICTED_BY_KUEUE)
            if mine and c.get("status") == "True":
                return str(c.get("message") or c.get("reason"))
    return None


STOPPED = "Stopped"  # the reason of the Event Kueue records on each pod it stops


def missed_stop_candidates(job: dict[str, Any], desired: list[str], pods: list[dict[str, Any]]) -> list[str]:
    """This attempt's pods that are gone while the job, queued through Kueue, was Running: the operator did not see
    them go (it was down, or its watch lagged), so only Kueue's Events on them can still say whether Kueue evicted
    the group. Empty when the pods are all there or the question does not arise."""
    status = job.get("status") or {}
    if queue_name(job.get("spec") or {}) is None or status.get("phase") != "Running":
        return []
    have = {p["metadata"]["name"] for p in pods}
    return [name for name in desired if name not in have]


def _event_time(event: dict[str, Any]) -> str:
    # RFC 3339 in UTC ("...Z"): compared as strings, to the second.
    return str(event.get("lastTimestamp") or event.get("eventTime") or "")[:19]


def stop_message(events: list[dict[str, Any]], pods: list[str], since: str) -> str | None:
    """Kueue's message from a `Stopped` Event on one of `pods` recorded at or after `since` (RFC 3339; the attempt's
    start), the newest, or None. Kueue records it on each pod of a group it evicts ("Preempted to accommodate a
    workload ...", "Exceeded the PodsReady timeout ...")."""
    names = set(pods)
    mine = [
        e
        for e in events
        if e.get("reason") == STOPPED
        and (e.get("involvedObject") or {}).get("kind") == "Pod"
        and (e.get("involvedObject") or {}).get("name") in names
        and e.get("message")
        and _event_time(e) >= since[:19]
    ]
    if not mine:
        return None
    return str(max(mine, key=_event_time)["message"])


def gated(pod: dict[str, Any]) -> bool:
    """The pod is held by a scheduling gate (Kueue's, until the group is admitted)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            return True
    return False


def never_fits(message: str) -> bool:
    """Kueue's scheduler message says the request exceeds what the ClusterQueue could ever lend, in every flavor it
    tried ("... > maximum capacity"), and no flavor is merely busy ("insufficient unused quota")."""
    return "maximum capacity" in message and "unused quota" not in message


def observe(
    workload: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    group: str,
    total: int,
    old: dict[str, Any] | None,
    stopped: str | None = None,
) -> QueueState:
    """The job's standing in its queue. `pods`: this attempt's pods; `old`: the job's previous Admitted condition;
    `stopped`: Kueue's message on this attempt's pods that went unseen (stop_message)."""
    evicting = pod_eviction(pods) or stopped
    conds = _conditions(workload)
    if evicting is not None:
        return QueueState("Preempted", f"evicted by Kueue: {evicting}", evicted=True)
    if workload is not None:
        # Before Finished: Kueue finishes an evicted group's Workload once its pods are gone, Evicted still True.
        if _true(conds, "Evicted") and not _true(conds, "Admitted"):
            ev = conds["Evicted"]
            return QueueState("Preempted", f"evicted by Kueue ({ev.get('reason')}): {ev.get('message')}", True)
        if _true(conds, "Finished"):
            return QueueState(ADMITTED, conds["Finished"].get("message") or "the Workload finished")
        if _true(conds, "Admitted"):
            cq = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue", "?")
            return QueueState(ADMITTED, f"admitted by ClusterQueue {cq} (Workload {group})")
        qr = conds.get("QuotaReserved") or {}
        message = str(qr.get("message") or "")
        if qr.get("reason") == "Inadmissible" or (qr.get("status") == "False" and never_fits(message)):
            return QueueState("Inadmissible", message or "Kueue cannot admit this job")
        if qr.get("status") == "True":
            return QueueState("Queued", f"quota reserved, waiting for admission checks (Workload {group})")
        waiting = message or f"waiting in queue (Workload {group})"
        return _keep_preempted(old, waiting)
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    if len(live) >= total > 0 and not any(gated(p) for p in live):
        # Kueue lifts the gates only on admission: what the pods say when the Workload is not (yet) seen.
        return QueueState(ADMITTED, f"admitted by Kueue (the scheduling gates of group {group} are lifted)")
    waiting = f"waiting for Kueue to create Workload {group} ({len(live)} of {total} pod(s) exist)"
    return _keep_preempted(old, waiting)


def _keep_preempted(old: dict[str, Any] | None, waiting: str) -> QueueState:
    """After an eviction the job waits again; the condition keeps saying why until it is admitted."""
    if old and old.get("reason") == "Preempted" and old.get("status") == "False":
        cause = str(old.get("message") or "").split("; waiting again: ")[0]
        return QueueState("Preempted", f"{cause}; waiting again: {waiting}")
    return QueueState("Queued", waiting)


def admitted_condition(state: QueueState, old: dict[str, Any] | None, now: str, generation: int) -> dict[str, Any]:
    prev = {ADMITTED: old} if old else {}
    return condition(prev, ADMITTED, state.admitted, state.reason, state.message[:2000], now, generation)


def old_condition(status: dict[str, Any]) -> dict[str, Any] | None:
    for c in status.get("conditions") or []:
        if c.get("type") == ADMITTED:
            return dict(c)
    return None
