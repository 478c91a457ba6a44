"""An eviction the operator did not see: it was down while Kueue evicted a running group, deleted its pods, and the
pods' Workload went with them. Kueue's `Stopped` Events on the pods are what is left (kueue.stop_message); the
chaos test test_kueue_operator_kills.py found the restart counted as a failure without them."""

from __future__ import annotations

from typing import Any

from tabjob.controller.policy.decision import rfc3339
from tabjob.controller.policy.kueue import missed_stop_candidates, stop_message
from tests.unit.decide_cases import NOW
from tests.unit.decided import decide
from tests.unit.test_kueue_decide import EVICTED, admitted, observe, pod, queued_job

PREEMPTED = "Preempted to accommodate a workload (UID: x, JobUID: y) due to prioritization in the ClusterQueue"


def event(
    pod_name: str, reason: str = "Stopped", at: str = "2026-11-26T01:05:00Z", message: str = PREEMPTED
) -> dict[str, Any]:
    """An Event as Kueue v0.17.0's job reconciler records it on each pod of a group it stops."""
    return {
        "metadata": {"name": f"{pod_name}.188", "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": "ns", "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "type": "Normal",
        "lastTimestamp": at,
        "source": {"component": "pod-kueue-controller"},
        "reportingComponent": "pod-kueue-controller",
    }


def test_kueues_stopped_event_on_a_gone_pod_is_its_message() -> None:
    since = "2026-11-26T01:00:00Z"
    assert stop_message([event("qs-0")], ["qs-0", "qs-1"], since) == PREEMPTED
    later = event("qs-1", at="2026-11-26T01:06:00Z", message="Exceeded the PodsReady timeout")
    assert stop_message([event("qs-0"), later], ["qs-0", "qs-1"], since) == "Exceeded the PodsReady timeout"


def test_other_events_pods_and_older_attempts_say_nothing() -> None:
    since = "2026-11-26T01:00:00Z"
    assert stop_message([event("qs-0", reason="Killing")], ["qs-0"], since) is None
    assert stop_message([event("other-0")], ["qs-0"], since) is None
    assert stop_message([event("qs-0", message="")], ["qs-0"], since) is None
    # Before the attempt started: a job of the same name, deleted and created again, reuses the pod names.
    assert stop_message([event("qs-0", at="2026-11-26T00:59:59Z")], ["qs-0"], since) is None
    with_micro = event("qs-0", at="")
    with_micro["eventTime"] = "2026-11-26T01:00:00.123456Z"
    assert stop_message([with_micro], ["qs-0"], since) == PREEMPTED


def test_the_question_arises_only_for_a_running_queued_job_missing_pods() -> None:
    running = queued_job({"phase": "Running"})
    assert missed_stop_candidates(running, ["qs-0", "qs-1"], [pod(1)]) == ["qs-0"]
    assert missed_stop_candidates(running, ["qs-0", "qs-1"], [pod(0), pod(1)]) == []
    assert missed_stop_candidates(queued_job({"phase": "Pending"}), ["qs-0"], []) == []
    unqueued = queued_job({"phase": "Running"})
    del unqueued["spec"]["scheduling"]
    assert missed_stop_candidates(unqueued, ["qs-0"], []) == []


def test_a_running_groups_pods_gone_with_kueues_stop_event_is_an_eviction_not_a_failure() -> None:
    old = {"phase": "Running", "startTime": rfc3339(NOW), "restarts": 0}
    d = decide(observe(queued_job(old), [], kueue_stopped=PREEMPTED))
    assert (d.status["phase"], d.status.get("restarts", 0), d.status["requeues"]) == ("Pending", 0, 1)
    assert "lastFailure" not in d.status and "nextRetryTime" not in d.status
    cond = admitted(d.status)
    assert (cond["status"], cond["reason"]) == ("False", "Preempted") and "prioritization" in cond["message"]


def test_without_kueues_word_pods_gone_from_a_running_group_are_still_a_failure() -> None:
    old = {"phase": "Running", "startTime": rfc3339(NOW), "restarts": 0}
    d = decide(observe(queued_job(old), [pod(1)]))
    assert d.status["restarts"] == 1 and d.status.get("requeues", 0) == 0
    assert "was deleted while the group ran" in d.status["lastFailure"]


def test_an_evicted_workload_that_kueue_has_finished_is_still_an_eviction() -> None:
    # Kueue finishes an evicted unretriable group's Workload once its pods are gone; Evicted stays True.
    finished = {**EVICTED, "status": {**EVICTED["status"]}}
    finished["status"]["conditions"] = [
        *EVICTED["status"]["conditions"],
        {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "Pods succeeded: 0/2."},
    ]
    old = {"phase": "Running", "startTime": rfc3339(NOW)}
    d = decide(observe(queued_job(old), [], workload=finished))
    assert (d.status["phase"], d.status.get("restarts", 0), d.status["requeues"]) == ("Pending", 0, 1)
    assert admitted(d.status)["reason"] == "Preempted"
