"""Admission policy for a job queued through Kueue (spec.scheduling.queueName): three hooks into `decide`.

- `on_eviction`: Kueue is stopping this attempt's pods (preemption, waitForPodsReady, a stopped queue). Not a
  failure: no restart, no back-off, no lastFailure. The surviving pods go, `requeues` moves the job to its next
  attempt (a new pod group, so a new Workload), and the deadline clock stops as a suspended Job's does.
- `waiting`: every pod exists but the group is not admitted: Pending, with Kueue's own reason and message.
- `stamp`: on every pass, the `Admitted` condition, an Event when it changes, and the rule that pods the operator
  deletes without a failure (suspend, a spec edit while queued) also start a new group: Kueue finishes a group
  once none of its pods can run, so a group is never filled twice.
"""

from __future__ import annotations

from typing import Any

from tabjob.controller.policy import deadline, kueue
from tabjob.controller.policy import pods as podstate
from tabjob.controller.policy.decision import Decision, Event, Pass

FINAL = ("Succeeded", "Failed")


def managed(p: Pass) -> bool:
    return kueue.queue_name(p.spec) is not None


def state(p: Pass, current: list[dict[str, Any]], attempt: int) -> kueue.QueueState:
    total = len(p.obs.desired.pods) if p.obs.desired else len(current)
    group = kueue.group_name(p.obs.job["metadata"]["name"], attempt)
    return kueue.observe(p.obs.workload, current, group, total, kueue.old_condition(p.old), p.obs.kueue_stopped)


def _requeue(p: Pass) -> None:
    if p.new.get("requeues") == p.old.get("requeues"):
        p.new["requeues"] = int(p.old.get("requeues") or 0) + 1


def on_eviction(p: Pass, q: kueue.QueueState, current: list[dict[str, Any]]) -> Decision | None:
    """Kueue evicted this attempt: its pods go (Kueue deletes them too), the job queues again as a new group."""
    if not q.evicted or not (current or p.old_phase == "Running"):
        return None
    p.d.delete_pods += [podstate.name(x) for x in current if not podstate.terminating(x)]
    _requeue(p)
    p.new.pop("nextRetryTime", None)
    return p.finish("Pending", "Preempted", q.message)


def waiting(p: Pass, q: kueue.QueueState, current: list[dict[str, Any]]) -> Decision | None:
    """All pods exist and Kueue still holds them: Pending with Kueue's reason (Queued, Inadmissible, Preempted)."""
    if q.admitted or not any(kueue.gated(x) for x in current):
        return None
    return p.finish("Pending", q.reason, q.message, stalled=q.reason == "Inadmissible")


def stamp(p: Pass, q: kueue.QueueState | None, current: list[dict[str, Any]], d: Decision) -> Decision:
    """The Admitted condition on whatever the pass decided (`d`), and its Event when it changes."""
    if q is None:
        return d
    phase = p.new.get("phase")
    old = kueue.old_condition(p.old)
    if phase not in FINAL:
        deleted = set(d.delete_pods)
        restarted = int(p.new.get("restarts") or 0) != int(p.old.get("restarts") or 0)
        if not restarted and any(podstate.name(x) in deleted for x in current):
            _requeue(p)
    if phase == "Suspended":
        q = kueue.QueueState("Suspended", "suspended: the job holds no quota until it is resumed")
    if phase in FINAL and old is not None:
        cond = old
    else:
        cond = kueue.admitted_condition(q, old, p.now, p.generation)
        if phase not in FINAL:
            # activeDeadlineSeconds counts from admission, as for a Job that Kueue unsuspends.
            if q.admitted:
                deadline.arm(p)
            else:
                p.new.pop("startTime", None)
        changed = old is None or (old.get("status"), old.get("reason")) != (cond["status"], cond["reason"])
        if changed and cond["reason"] not in {e.reason for e in d.events}:
            kind = "Normal" if cond["reason"] in (kueue.ADMITTED, "Queued", "Suspended") else "Warning"
            d.events.append(Event(kind, cond["reason"], cond["message"]))
    conds = [c for c in p.new.get("conditions") or [] if c.get("type") != kueue.ADMITTED]
    p.new["conditions"] = [*conds, cond]
    return d
