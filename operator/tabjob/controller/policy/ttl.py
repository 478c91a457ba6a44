"""TTL policy: a finished job keeps its verdict (and its pods, for logs) until ttlSecondsAfterFinished runs out.

Like a Job, a finished run is final: later spec edits (say, a TTL) do not start it again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tabjob.controller.policy import pods as podstate
from tabjob.controller.policy.conditions import conditions_for, reason_of
from tabjob.controller.policy.decision import Decision, Pass, parse_time


def finished(status: dict[str, Any]) -> bool:
    """A final verdict is on record: later spec edits change nothing."""
    return status.get("phase") in ("Succeeded", "Failed") and bool(status.get("completionTime"))


def keep_verdict(p: Pass) -> Decision:
    phase = str(p.old_phase)
    p.new["conditions"] = conditions_for(
        phase,
        reason_of(p.old, phase),
        p.old.get("message", ""),
        phase == "Failed",
        p.old.get("conditions") or [],
        p.now,
        p.generation,
    )
    p.d.delete_pods = [podstate.name(x) for x in p.obs.pods if not podstate.terminating(x) and not podstate.done(x)]
    # A pod stuck Terminating on a lost node outlives the verdict (no kubelet confirms its deletion): past the same
    # bound as a running job's, it is force-deleted, so a failure by node loss leaves nothing behind.
    for pod in p.obs.pods:
        due = podstate.lost(pod, p.obs.now, p.obs.settings.lost_pod_timeout)
        if due is not None and due <= 0:
            p.d.force_delete.append(podstate.name(pod))
        elif due is not None:
            p.d.wake(due)
    ttl = p.run_policy.get("ttlSecondsAfterFinished")
    if ttl is not None:
        done_at = parse_time(p.old["completionTime"]) or p.obs.now
        left = (done_at + timedelta(seconds=int(ttl)) - p.obs.now).total_seconds()
        if left <= 0:
            p.d.delete_job = True
        else:
            p.d.wake(left)
    return p.d
