"""policy/pods.py through decide: unschedulable, image pull, and pods stuck terminating on a lost node."""

from __future__ import annotations

from datetime import timedelta

from tabjob.controller.policy.decision import rfc3339
from tests.unit.decide_cases import NOW, cond, job_doc, names, observe, pod
from tests.unit.decided import decide


def test_unschedulable_is_pending_then_stalled_with_the_scheduler_message() -> None:
    msg = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    since = rfc3339(NOW - timedelta(seconds=10))
    pods = [pod(0, unschedulable=msg, since=since), pod(1, unschedulable=msg, since=since)]
    # An autoscaler may add a node: Pending, not Stalled, until the grace runs out (and a pass is due then).
    d = decide(observe(job_doc({"phase": "Pending"}), pods, unschedulable_grace=60))
    assert d.status["phase"] == "Pending" and cond(d.status, "Stalled")["status"] == "False"
    assert cond(d.status, "Reconciling")["reason"] == "Unschedulable" and d.requeue_after == 50
    d = decide(observe(job_doc({"phase": "Pending"}), pods, unschedulable_grace=5))
    stalled = cond(d.status, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "Unschedulable")
    assert msg in stalled["message"]
    assert [e.type for e in d.events] == ["Warning"]


def test_image_pull_backoff_waits_then_fails_naming_the_image() -> None:
    pods = [pod(0, "Pending", waiting="ImagePullBackOff"), pod(1)]
    d = decide(observe(job_doc({"phase": "Pending"}), pods, image_pull_timeout=300))
    assert d.status["phase"] == "Pending" and d.requeue_after == 300
    assert cond(d.status, "Reconciling")["reason"] == "ImagePullBackOff"
    assert cond(d.status, "Stalled")["status"] == "False"
    later = NOW + timedelta(seconds=301)
    d = decide(observe(job_doc({"phase": "Pending"}), pods, now=later, image_pull_timeout=300))
    assert d.status["phase"] == "Failed" and d.status["completionTime"] == rfc3339(later)
    failed = cond(d.status, "Failed")
    assert failed["reason"] == "ImagePullBackOff"
    assert 'image "registry.example/trainer:nope"' in failed["message"]
    assert sorted(d.delete_pods) == ["qs-0", "qs-1"] and "restarts" not in d.status


def test_invalid_image_name_fails_at_once() -> None:
    why = 'Failed to apply default image tag "Bad:Image": couldn\'t parse image name: invalid reference format'
    pods = [pod(0, "Pending", waiting="InvalidImageName", why=why), pod(1)]
    d = decide(observe(job_doc({"phase": "Pending"}), pods))
    assert cond(d.status, "Failed")["reason"] == "InvalidImageName"
    assert "invalid reference format" in d.status["message"] and "registry.example/trainer:nope" in d.status["message"]


def test_pods_stuck_terminating_on_a_lost_node_count_as_gone_after_a_bound() -> None:
    status = {"phase": "Pending", "restarts": 1, "startTime": rfc3339(NOW), "lastFailure": "x"}
    stuck = [pod(0, deleting=rfc3339(NOW - timedelta(seconds=100))), pod(1, deleting=rfc3339(NOW))]
    d = decide(observe(job_doc(status), stuck, lost_pod_timeout=300))
    assert d.create == [] and d.force_delete == [] and d.requeue_after == 200
    assert cond(d.status, "Reconciling")["reason"] == "WaitingForPreviousPods"
    later = NOW + timedelta(seconds=301)
    d = decide(observe(job_doc(status), stuck, now=later, lost_pod_timeout=300))
    assert sorted(d.force_delete) == ["qs-0", "qs-1"]
    assert names(d.create) == ["qs-0-r1", "qs-1-r1"]
