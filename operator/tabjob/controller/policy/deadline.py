"""Deadline policy: activeDeadlineSeconds counts from the first pod creation of this run, back-off included."""

from __future__ import annotations

from datetime import timedelta

from tabjob.controller.policy import pods as podstate
from tabjob.controller.policy.decision import Decision, Pass, parse_time


def check(p: Pass) -> Decision | None:
    """The Failed verdict once the deadline has passed; otherwise asks for a pass when it will."""
    deadline = p.run_policy.get("activeDeadlineSeconds")
    start = parse_time(p.new.get("startTime"))
    if not deadline or not start:
        return None
    left = (start + timedelta(seconds=int(deadline)) - p.obs.now).total_seconds()
    if left > 0:
        p.d.wake(left)
        return None
    survivors = [podstate.name(x) for x in p.obs.pods if not podstate.terminating(x) and not podstate.done(x)]
    return p.fail("DeadlineExceeded", f"the job ran longer than activeDeadlineSeconds={deadline}", survivors)


def arm(p: Pass) -> None:
    """Pods are being created for the first time this run: the deadline starts now."""
    deadline = p.run_policy.get("activeDeadlineSeconds")
    if deadline and not p.new.get("startTime"):
        p.d.wake(float(deadline))
    p.new.setdefault("startTime", p.now)
