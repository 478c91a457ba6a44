"""decide for a job queued through Kueue: one row per state of its Workload and pods (admission.py, kueue.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tabjob.contracts.pod import KUEUE_GROUP_LABEL as KUEUE_GROUP
from tabjob.contracts.pod import KUEUE_QUEUE_LABEL as KUEUE_QUEUE
from tabjob.contracts.pod import KUEUE_RETRIABLE
from tabjob.controller.policy.decision import rfc3339
from tabjob.controller.policy.kueue import job_of_workload, never_fits
from tests.unit.decide_cases import NOW, SUMMARY, cond, job_doc, observe, pod
from tests.unit.decided import decide


def queued_job(status: dict[str, Any] | None = None, **run_policy: Any) -> dict[str, Any]:
    doc = job_doc(status, **run_policy)
    doc["spec"]["scheduling"] = {"queueName": "team-a", "priorityClassName": "low"}
    return doc


def workload(*conds: tuple[str, str, str, str], cq: str = "cq") -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conds]
    }
    if any(t == "Admitted" and s == "True" for t, s, _, _ in conds):
        status["admission"] = {"clusterQueue": cq}
    return {"metadata": {"name": "qs-0", "namespace": "ns"}, "spec": {"queueName": "team-a"}, "status": status}


PENDING = workload(("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set a: insufficient unused "
                    "quota for nvidia.com/gpu in flavor gpu, 1 more needed"))  # fmt: skip
TOO_BIG = workload(("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set a: insufficient quota "
                    "for nvidia.com/gpu in flavor gpu, previously considered podsets requests (0) + current podset "
                    "request (3) > maximum capacity (2)"))  # fmt: skip
NO_LQ = workload(("QuotaReserved", "False", "Inadmissible", "LocalQueue team-a doesn't exist"))
ADMITTED = workload(("QuotaReserved", "True", "QuotaReserved", "ok"), ("Admitted", "True", "Admitted", "ok"))
EVICTED = workload(
    ("QuotaReserved", "False", "Pending", "Preempted"),
    ("Admitted", "False", "NoReservation", ""),
    ("Evicted", "True", "Preempted", "Preempted to accommodate a workload (UID: x) due to prioritization"),
)


def admitted(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Admitted")


def gated(i: int, attempt: int = 0) -> dict[str, Any]:
    return pod(i, "Pending", attempt=attempt, gated=True)


def evicted_pod(i: int, attempt: int = 0, reason: str = "WorkloadEvictedDueToPreempted") -> dict[str, Any]:
    # What Kueue v0.17.0 writes on each pod of a group it stops: its reason is "WorkloadEvictedDueTo" + the
    # Workload's Evicted reason (jobframework's reconciler, for composable jobs such as pod groups).
    p = pod(i, "Running", attempt=attempt, deleting=True)
    p["status"]["conditions"] = [
        {"type": "TerminationTarget", "status": "True", "reason": reason, "message": "Preempted to "
         "accommodate a workload (UID: x) due to prioritization in the ClusterQueue"}
    ]  # fmt: skip
    return p


@pytest.mark.parametrize(
    ("wl", "reason", "needle"),
    [
        (None, "Queued", "waiting for Kueue to create Workload qs-0 (2 of 2 pod(s) exist)"),
        (PENDING, "Queued", "insufficient unused quota for nvidia.com/gpu"),
        (TOO_BIG, "Inadmissible", "nvidia.com/gpu"),
        (NO_LQ, "Inadmissible", "LocalQueue team-a doesn't exist"),
    ],
)
def test_gated_group_is_pending_with_kueues_reason(wl: dict[str, Any] | None, reason: str, needle: str) -> None:
    d = decide(observe(queued_job({"phase": "Pending"}), [gated(0), gated(1)], workload=wl))
    assert d.status["phase"] == "Pending"
    assert d.status["conditions"][2]["status"] == ("True" if reason == "Inadmissible" else "False")  # Stalled
    cond = admitted(d.status)
    assert (cond["status"], cond["reason"]) == ("False", reason)
    assert needle in cond["message"] and needle in d.status["message"]
    assert not d.create and not d.delete_pods
    assert "startTime" not in d.status  # queued time is not run time
    assert [e.reason for e in d.events] == [reason]


def test_admission_makes_the_condition_true_and_starts_the_deadline_clock() -> None:
    old = {"phase": "Pending", "conditions": [{"type": "Admitted", "status": "False", "reason": "Queued"}]}
    d = decide(observe(queued_job(old, activeDeadlineSeconds=600), [pod(0), pod(1)], workload=ADMITTED))
    assert d.status["phase"] == "Running"
    cond = admitted(d.status)
    assert (cond["status"], cond["reason"]) == ("True", "Admitted")
    assert "ClusterQueue cq" in cond["message"]
    assert d.status["startTime"] == rfc3339(NOW)
    assert "Admitted" in [e.reason for e in d.events]


def test_eviction_is_not_a_failure_and_starts_a_new_group() -> None:
    old = {"phase": "Running", "startTime": rfc3339(NOW), "restarts": 0}
    # Kueue stopped rank 0 (Terminating, TerminationTarget); rank 1 still runs and would see its peer gone.
    d = decide(observe(queued_job(old), [evicted_pod(0), pod(1)], workload=ADMITTED))
    assert d.status["phase"] == "Pending"
    assert d.status["restarts"] == 0 and "lastFailure" not in d.status and "nextRetryTime" not in d.status
    assert d.status["requeues"] == 1
    assert d.delete_pods == ["qs-1"]
    assert "startTime" not in d.status
    cond = admitted(d.status)
    assert (cond["status"], cond["reason"]) == ("False", "Preempted")
    assert "prioritization" in cond["message"]


@pytest.mark.parametrize(
    "reason", ["WorkloadEvictedDueToPreempted", "WorkloadEvictedDueToPodsReadyTimeout", "WorkloadEvicted"]
)
def test_every_eviction_reason_kueue_writes_on_a_pod_is_an_eviction(reason: str) -> None:
    old = {"phase": "Running", "startTime": rfc3339(NOW), "restarts": 0}
    d = decide(observe(queued_job(old), [evicted_pod(0, reason=reason), pod(1)], workload=ADMITTED))
    assert (d.status["phase"], d.status.get("restarts", 0), d.status["requeues"]) == ("Pending", 0, 1)
    assert admitted(d.status)["reason"] == "Preempted"


def test_after_an_eviction_the_next_group_waits_for_the_old_pods_then_queues_again() -> None:
    preempted = {"type": "Admitted", "status": "False", "reason": "Preempted", "message": "evicted by Kueue: x"}
    old = {"phase": "Pending", "requeues": 1, "conditions": [preempted]}
    d = decide(observe(queued_job(old), [evicted_pod(0)]))
    assert d.status["message"].startswith("waiting for 1 pod(s) of a previous attempt") and not d.create
    d = decide(observe(queued_job(old), []))
    assert [o["metadata"]["name"] for o in d.create if o["kind"] == "Pod"] == ["qs-0-r1", "qs-1-r1"]
    labels = d.create[-1]["metadata"]["labels"]
    assert labels[KUEUE_GROUP] == "qs-1" and labels[KUEUE_QUEUE] == "team-a"
    assert d.create[-1]["metadata"]["annotations"][KUEUE_RETRIABLE] == "false"
    d = decide(observe(queued_job(old), [gated(0, 1), gated(1, 1)]))
    cond = admitted(d.status)
    assert (cond["reason"], d.status["phase"]) == ("Preempted", "Pending")  # still says why it waits again
    assert "evicted by Kueue: x; waiting again: waiting for Kueue" in cond["message"]
    assert d.status.get("restarts", 0) == 0 and d.status["requeues"] == 1


def test_an_evicted_workload_of_a_running_job_whose_pods_are_gone_counts_no_restart() -> None:
    old = {"phase": "Running", "startTime": rfc3339(NOW)}
    d = decide(observe(queued_job(old), [], workload=EVICTED))
    assert (d.status["phase"], d.status.get("restarts", 0), d.status["requeues"]) == ("Pending", 0, 1)
    assert admitted(d.status)["reason"] == "Preempted"


def test_a_real_failure_of_an_admitted_group_is_still_a_retry() -> None:
    old = {"phase": "Running", "startTime": rfc3339(NOW)}
    d = decide(observe(queued_job(old), [pod(0, "Failed", exit=137, reason="Error"), pod(1)], workload=ADMITTED))
    assert d.status["restarts"] == 1 and d.status.get("requeues", 0) == 0
    assert d.status["conditions"][-1]["type"] == "Admitted"


def test_suspend_deletes_the_group_and_the_resume_is_a_new_group() -> None:
    old = {"phase": "Running", "startTime": rfc3339(NOW)}
    d = decide(observe(queued_job(old, suspend=True), [pod(0), pod(1)], workload=ADMITTED))
    assert d.status["phase"] == "Suspended" and d.status["requeues"] == 1
    assert sorted(d.delete_pods) == ["qs-0", "qs-1"]
    assert admitted(d.status)["reason"] == "Suspended"


def test_success_keeps_the_admitted_condition() -> None:
    cond = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted by ClusterQueue cq"}
    old = {"phase": "Running", "startTime": rfc3339(NOW), "conditions": [cond]}
    done = [pod(i, "Succeeded", exit=0, message=SUMMARY_JSON) for i in (0, 1)]
    d = decide(observe(queued_job(old), done, workload=ADMITTED))
    assert d.status["phase"] == "Succeeded"
    assert admitted(d.status)["status"] == "True"


def test_jobs_without_a_queue_get_no_admitted_condition() -> None:
    d = decide(observe(job_doc({"phase": "Pending"}), [pod(0), pod(1)]))
    assert all(c["type"] != "Admitted" for c in d.status["conditions"])


def test_names_and_messages() -> None:
    assert job_of_workload("my-job-3") == ("my-job", 3) and job_of_workload("other") is None
    assert never_fits(TOO_BIG["status"]["conditions"][0]["message"])
    assert not never_fits(PENDING["status"]["conditions"][0]["message"])


SUMMARY_JSON = __import__("json").dumps(SUMMARY)


def test_the_cache_files_workloads_under_the_job_whose_group_they_are() -> None:
    from tabjob.controller.runtime.cache import Cache

    cache = Cache()
    job = queued_job({"restarts": 1, "requeues": 1})
    cache.on_job("ADDED", job)
    wl = {**ADMITTED, "metadata": {"name": "qs-2", "namespace": "ns", "uid": "w"}}
    wl["spec"] = {"queueName": "team-a", "podSets": [{"template": {"spec": {"containers": [{"name": "big"}]}}}]}
    assert cache.on_workload("ADDED", wl) == ("ns", "qs")
    seen = cache.workload_of(("ns", "qs"), job)
    assert seen is not None and seen["status"]["admission"]["clusterQueue"] == "cq"
    assert "podSets" not in seen["spec"]  # the pod templates are ours: not kept
    assert cache.workload_of(("ns", "qs"), queued_job({"restarts": 1})) is None  # another attempt's group
    assert cache.on_workload("ADDED", {**wl, "metadata": {"name": "unrelated", "namespace": "ns"}}) is None
    cache.on_workload("DELETED", wl)
    assert cache.workload_of(("ns", "qs"), job) is None


def test_without_a_workload_ungated_pods_mean_admitted() -> None:
    """The Workload watch off (TABJOB_KUEUE=0) or behind the pods' events: lifted gates are Kueue's admission."""
    old = {"phase": "Pending", "conditions": [{"type": "Admitted", "status": "False", "reason": "Queued"}]}
    d = decide(observe(queued_job(old, activeDeadlineSeconds=60), [pod(0), pod(1)]))
    assert (d.status["phase"], admitted(d.status)["status"]) == ("Running", "True")
    assert d.status["startTime"] == rfc3339(NOW)
    d = decide(observe(queued_job(old), [pod(0), gated(1)]))
    assert admitted(d.status)["reason"] == "Queued" and d.status["phase"] == "Pending"


def test_kueue_gated_pods_are_queued_not_stalled() -> None:
    long_ago = rfc3339(NOW - timedelta(hours=3))
    d = decide(observe(job_doc({"phase": "Pending"}), [pod(0, gated=True, since=long_ago), pod(1, gated=True)]))
    assert d.status["phase"] == "Pending"
    assert cond(d.status, "Stalled")["status"] == "False"
    assert cond(d.status, "Reconciling")["reason"] == "Queued"
