"""policy/deadline.py through decide: activeDeadlineSeconds, during a retry's back-off too."""

from __future__ import annotations

from datetime import timedelta

from tabjob.controller.policy.decision import rfc3339
from tests.unit.decide_cases import NOW, cond, job_doc, observe, pod
from tests.unit.decided import decide


def test_deadline_exceeded() -> None:
    start = rfc3339(NOW - timedelta(seconds=100))
    d = decide(observe(job_doc({"phase": "Running", "startTime": start}, activeDeadlineSeconds=60), [pod(0), pod(1)]))
    assert d.status["phase"] == "Failed"
    assert cond(d.status, "Failed")["reason"] == "DeadlineExceeded"
    assert sorted(d.delete_pods) == ["qs-0", "qs-1"]
    d = decide(observe(job_doc({"phase": "Running", "startTime": start}, activeDeadlineSeconds=160), [pod(0), pod(1)]))
    assert d.status["phase"] == "Running" and d.requeue_after == 60


def test_active_deadline_is_enforced_during_back_off() -> None:
    status = {
        "phase": "Pending",
        "restarts": 1,
        "startTime": rfc3339(NOW - timedelta(seconds=100)),
        "nextRetryTime": rfc3339(NOW + timedelta(seconds=300)),
        "lastFailure": "x",
    }
    d = decide(observe(job_doc(status, activeDeadlineSeconds=60), []))
    assert d.status["phase"] == "Failed" and cond(d.status, "Failed")["reason"] == "DeadlineExceeded"
    assert "nextRetryTime" not in d.status
    # Within the deadline the pass wakes at whichever comes first: the retry or the deadline.
    d = decide(observe(job_doc(status, activeDeadlineSeconds=160), []))
    assert cond(d.status, "Reconciling")["reason"] == "BackoffDelay" and d.requeue_after == 60
