"""Suspend policy: delete the pods, keep results and restarts; the deadline clock stops (startTime cleared)."""

from __future__ import annotations

from tabjob.controller.policy import pods as podstate
from tabjob.controller.policy.decision import Decision, Pass


def suspended(p: Pass) -> bool:
    return bool(p.run_policy.get("suspend"))


def suspend(p: Pass) -> Decision:
    p.d.delete_pods = [podstate.name(x) for x in p.obs.pods if not podstate.terminating(x)]
    p.new.pop("startTime", None)
    p.new.pop("nextRetryTime", None)
    return p.finish("Suspended", "Suspended", "suspended: pods deleted, results kept")
