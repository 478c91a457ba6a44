"""The platform's policy (tabjob.api.platform_policy): a job that asks for more than the cluster allows gets no pods.

The API server's ValidatingAdmissionPolicy refuses such a job at `kubectl apply`; this catches the ones it never
judged: created before the policy was installed or while it was laxer, or in a cluster whose installer could not
create admission policies. Such a job is Pending and Stalled (reason PolicyViolation, each breach named with what
is allowed) until its spec or the policy changes; nothing of it is created, not even its plan ConfigMap. Pods that
already run are left alone, as admission leaves running pods alone; a retry of them would need new pods, and stops
here.
"""

from __future__ import annotations

from tabjob.api.platform_policy import check_policy
from tabjob.controller.policy.decision import Decision, Pass

# The policy is read from a mount: a job stalled by it is looked at again this often (seconds), so that widening the
# policy lets it start without an edit of its own.
RECHECK = 60.0


def refused(p: Pass) -> Decision | None:
    """The Stalled verdict for a job that breaches the policy, or None."""
    problems = check_policy(p.spec, p.obs.policy)
    if not problems:
        return None
    p.d.create.clear()
    p.d.wake(RECHECK)
    message = "the cluster's policy refuses this job: " + "; ".join(f"{path}: {msg}" for path, msg in problems)
    return p.finish("Pending", "PolicyViolation", message[:2000], stalled=True)
