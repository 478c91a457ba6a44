"""status.decide: observed pods -> actions and status, one transition per test, from plain dicts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tabjob.api import parse_manifest
from tabjob.errors import SpecError
from tabjob.operator.builders import JobRef, build_children
from tabjob.operator.config import Settings
from tabjob.operator.status import Observed, decide, parse_summary, results_from_summary, retry_delay, rfc3339
from tabjob.planner import plan_job

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
SUMMARY = {
    "bestModel": "WeightedEnsemble",
    "score": 0.99,
    "evalMetric": "roc_auc",
    "fitsDone": 6,
    "fitsFailed": 0,
    "models": [
        {"name": "WeightedEnsemble", "state": "Succeeded", "scoreVal": 0.99, "fitSeconds": 0.1, "device": "cpu"},
        {"name": "GBM", "state": "Succeeded", "score_val": 0.98, "fit_seconds": 1.5, "gpus": 0, "device": "cpu"},
    ],
}


def job_doc(status: dict[str, Any] | None = None, **run_policy: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": "qs", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {
            "data": {"train": "sklearn://breast_cancer", "label": "target"},
            "output": {"path": "/output/qs"},
            "resources": {"cpus": 2, "cpusPerPod": 1},
            "models": {"GBM": [{}]},
            "bagging": {"folds": 2},
            "runPolicy": run_policy,
        },
        "status": status or {},
    }


def observe(doc: dict[str, Any], pods: list[dict[str, Any]], now: datetime = NOW, **kw: Any) -> Observed:
    status = doc.get("status") or {}
    try:
        job = parse_manifest({k: v for k, v in doc.items() if k != "status"})
        plan = plan_job(job)
        ref = JobRef("qs", "ns", "u1", 1)
        desired = build_children(job, plan, ref, int(status.get("restarts") or 0), Settings())
        plan_json, problems = plan.to_json_dict(), []
    except SpecError as exc:
        desired, plan_json, problems = None, None, exc.lines()
    return Observed(
        job=doc,
        desired=desired,
        plan_json=plan_json,
        spec_problems=problems,
        pods=pods,
        have_configmap=kw.pop("have_configmap", True),
        have_service=kw.pop("have_service", True),
        now=now,
        **kw,
    )


def pod(index: int, phase: str = "Running", attempt: int = 0, **state: Any) -> dict[str, Any]:
    name = f"qs-{index}" if attempt == 0 else f"qs-{index}-r{attempt}"
    cs: dict[str, Any] = {"name": "trainer", "state": {"running": {}} if phase == "Running" else {}}
    if "exit" in state:
        cs["state"] = {
            "terminated": {
                "exitCode": state["exit"],
                "reason": state.get("reason", "Error"),
                "message": state.get("message", ""),
                "finishedAt": state.get("at", "x"),
            }
        }
    if "waiting" in state:
        cs["state"] = {"waiting": {"reason": state["waiting"], "message": "back-off pulling image"}}
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [cs]}
    if state.get("unschedulable"):
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": state["unschedulable"],
                }
            ],
        }
    meta: dict[str, Any] = {"name": name, "labels": {"tabjob.dev/rank": str(index), "tabjob.dev/attempt": str(attempt)}}
    if state.get("deleting"):
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {"metadata": meta, "status": status}


def cond(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == ctype)


def names(objs: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_fresh_job_creates_everything() -> None:
    d = decide(observe(job_doc(), [], have_configmap=False, have_service=False))
    assert names(d.create) == ["qs-plan", "qs", "qs-0", "qs-1"]
    assert d.status["phase"] == "Pending"
    assert d.status["startTime"] == rfc3339(NOW)
    assert d.status["plan"]["worldSize"] == 2
    assert d.status["progress"]["fitsTotal"] == 2
    assert cond(d.status, "Reconciling")["status"] == "True"
    assert d.status["observedGeneration"] == 1


def test_only_missing_pods_are_created() -> None:
    d = decide(observe(job_doc({"phase": "Pending"}), [pod(0, "Pending")]))
    assert names(d.create) == ["qs-1"]


def test_invalid_spec_is_failed_and_stalled_with_the_field() -> None:
    doc = job_doc()
    doc["spec"]["models"] = {"GBM": [{"resources": {"cpus": 3}}]}
    d = decide(observe(doc, []))
    assert d.create == []
    assert d.status["phase"] == "Failed"
    assert cond(d.status, "Stalled") == {**cond(d.status, "Stalled"), "status": "True", "reason": "InvalidSpec"}
    assert "spec.models.GBM[0].resources.cpus" in d.status["message"]
    assert [e.reason for e in d.events] == ["InvalidSpec"]


def test_running_reads_progress() -> None:
    progress = {"fitsDone": 1, "bestScore": 0.9, "bestModel": "GBM"}
    d = decide(observe(job_doc({"phase": "Pending"}), [pod(0), pod(1)], progress=progress))
    assert d.status["phase"] == "Running"
    assert d.read_progress
    assert d.status["progress"]["summary"] == "1/2"
    assert d.status["progress"]["bestScore"] == 0.9
    assert cond(d.status, "Running")["status"] == "True"
    assert [e.reason for e in d.events] == ["Running"]


def test_succeeded_reads_the_termination_message() -> None:
    pods = [pod(0, "Succeeded", exit=0, message=json.dumps(SUMMARY)), pod(1, "Succeeded", exit=0)]
    d = decide(observe(job_doc({"phase": "Running"}), pods))
    s = d.status
    assert s["phase"] == "Succeeded"
    assert (s["bestModel"], s["score"], s["evalMetric"]) == ("WeightedEnsemble", 0.99, "roc_auc")
    assert [m["name"] for m in s["models"]] == ["WeightedEnsemble", "GBM"]
    assert s["models"][1] == {
        "name": "GBM",
        "state": "Succeeded",
        "scoreVal": 0.98,
        "fitSeconds": 1.5,
        "gpus": 0.0,
        "device": "cpu",
    }
    assert s["progress"]["summary"] == "6/2" or s["progress"]["fitsDone"] == 6
    assert s["completionTime"] == rfc3339(NOW)
    for ctype, value in [("Ready", "True"), ("Succeeded", "True"), ("Reconciling", "False"), ("Stalled", "False")]:
        assert cond(s, ctype)["status"] == value, ctype


def test_permanent_exit_fails_with_rank_code_and_last_lines() -> None:
    tail = "\n".join(f"line {i}" for i in range(20))
    pods = [pod(0), pod(1, "Failed", exit=3, message=tail)]
    d = decide(observe(job_doc({"phase": "Running"}), pods))
    assert d.status["phase"] == "Failed"
    failed = cond(d.status, "Failed")
    assert failed["reason"] == "NonZeroExit"
    assert "node rank 1" in failed["message"] and "code 3" in failed["message"]
    assert "line 19" in failed["message"] and "line 5" not in failed["message"]
    assert d.delete_pods == ["qs-0"]  # the survivor is stopped; the failed pod stays for its logs
    assert cond(d.status, "Stalled")["status"] == "True"


def test_signal_exit_is_retried_with_exponential_delay() -> None:
    pods = [pod(0, "Failed", exit=1, at="2"), pod(1, "Failed", exit=137, at="1")]
    d = decide(observe(job_doc({"phase": "Running"}, backoffLimit=2), pods, retry_base_delay=10))
    assert d.status["phase"] == "Pending"
    assert d.status["restarts"] == 1
    assert d.status["nextRetryTime"] == rfc3339(NOW + timedelta(seconds=10))
    assert sorted(d.delete_pods) == ["qs-0", "qs-1"]
    assert d.requeue_after == 10
    assert "code 137" in d.status["lastFailure"]  # the earliest failure, not its peer's reaction
    assert "Retrying" in [e.reason for e in d.events]


def test_retry_waits_then_recreates_the_group() -> None:
    status = {
        "phase": "Pending",
        "restarts": 1,
        "nextRetryTime": rfc3339(NOW + timedelta(seconds=5)),
        "lastFailure": "x",
    }
    d = decide(observe(job_doc(status), [pod(0, "Failed", exit=137, deleting=True)]))
    assert d.create == [] and d.status["conditions"][1]["reason"] == "BackoffDelay"
    later = NOW + timedelta(seconds=6)
    d = decide(observe(job_doc(status), [pod(0, "Failed", exit=137, deleting=True)], now=later))
    assert d.create == [] and cond(d.status, "Reconciling")["reason"] == "WaitingForPreviousPods"
    d = decide(observe(job_doc(status), [], now=later))
    assert names(d.create) == ["qs-0-r1", "qs-1-r1"]
    assert "nextRetryTime" not in d.status


def test_stale_attempt_pods_are_deleted() -> None:
    d = decide(
        observe(job_doc({"phase": "Running", "restarts": 1}), [pod(0, attempt=0), pod(0, attempt=1), pod(1, attempt=1)])
    )
    assert d.delete_pods == ["qs-0"]


@pytest.mark.parametrize(("restarts", "reason"), [(2, "BackoffLimitExceeded"), (0, "OOMKilled")])
def test_backoff_limit_and_oom(restarts: int, reason: str) -> None:
    limit = 2 if reason == "BackoffLimitExceeded" else 0
    pods = [
        pod(0, "Failed", attempt=restarts, exit=137, reason="OOMKilled" if reason == "OOMKilled" else "Error"),
        pod(1, attempt=restarts),
    ]
    d = decide(observe(job_doc({"phase": "Running", "restarts": restarts}, backoffLimit=limit), pods))
    assert d.status["phase"] == "Failed"
    assert cond(d.status, "Failed")["reason"] == "BackoffLimitExceeded"
    if reason == "OOMKilled":
        assert "out of memory" in cond(d.status, "Failed")["message"]


def test_unschedulable_is_pending_and_stalled_with_the_scheduler_message() -> None:
    msg = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    d = decide(observe(job_doc({"phase": "Pending"}), [pod(0, unschedulable=msg), pod(1, unschedulable=msg)]))
    assert d.status["phase"] == "Pending"
    stalled = cond(d.status, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "Unschedulable")
    assert msg in stalled["message"]
    assert [e.type for e in d.events] == ["Warning"]


def test_image_pull_error_has_its_own_reason() -> None:
    d = decide(observe(job_doc({"phase": "Pending"}), [pod(0, "Pending", waiting="ImagePullBackOff"), pod(1)]))
    assert cond(d.status, "Stalled")["reason"] == "ImagePullBackOff"


def test_suspend_deletes_pods_and_keeps_results() -> None:
    status = {"phase": "Running", "startTime": "t", "restarts": 1, "models": [{"name": "GBM"}]}
    d = decide(observe(job_doc(status, suspend=True), [pod(0, attempt=1), pod(1, attempt=1)]))
    assert d.status["phase"] == "Suspended"
    assert sorted(d.delete_pods) == ["qs-0-r1", "qs-1-r1"]
    assert d.status["models"] == [{"name": "GBM"}] and d.status["restarts"] == 1
    assert "startTime" not in d.status
    assert cond(d.status, "Suspended")["status"] == "True"
    # Resume: the same attempt's pods come back.
    d = decide(observe(job_doc(d.status), []))
    assert names(d.create) == ["qs-0-r1", "qs-1-r1"]
    assert cond(d.status, "Suspended")["status"] == "False"


def test_deadline_exceeded() -> None:
    start = rfc3339(NOW - timedelta(seconds=100))
    d = decide(observe(job_doc({"phase": "Running", "startTime": start}, activeDeadlineSeconds=60), [pod(0), pod(1)]))
    assert d.status["phase"] == "Failed"
    assert cond(d.status, "Failed")["reason"] == "DeadlineExceeded"
    assert sorted(d.delete_pods) == ["qs-0", "qs-1"]
    d = decide(observe(job_doc({"phase": "Running", "startTime": start}, activeDeadlineSeconds=160), [pod(0), pod(1)]))
    assert d.status["phase"] == "Running" and d.requeue_after == 60


@pytest.mark.parametrize(("age", "deleted"), [(30, False), (61, True)])
def test_ttl_after_finished(age: int, deleted: bool) -> None:
    status = {"phase": "Succeeded", "completionTime": rfc3339(NOW - timedelta(seconds=age)), "conditions": []}
    d = decide(observe(job_doc(status, ttlSecondsAfterFinished=60), []))
    assert d.delete_job is deleted
    assert d.create == []
    if not deleted:
        assert d.requeue_after == 30


def test_finished_job_is_final_and_quiet() -> None:
    pods = [pod(0, "Succeeded", exit=0, message=json.dumps(SUMMARY)), pod(1, "Succeeded", exit=0)]
    first = decide(observe(job_doc({"phase": "Running"}), pods))
    again = decide(observe(job_doc(first.status), pods, now=NOW + timedelta(seconds=90)))
    assert again.status == first.status  # nothing to patch
    assert again.events == [] and again.create == []


def test_transition_time_moves_only_on_flips() -> None:
    first = decide(observe(job_doc({"phase": "Pending"}), [pod(0), pod(1)]))
    later = NOW + timedelta(seconds=40)
    second = decide(observe(job_doc(first.status), [pod(0), pod(1)], now=later))
    assert cond(second.status, "Running")["lastTransitionTime"] == rfc3339(NOW)
    assert second.events == []


def test_retry_delay_doubles_and_caps() -> None:
    assert [retry_delay(n, 10, 60) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 60, 60]


def test_summary_parsing() -> None:
    assert parse_summary("Traceback...\nValueError: boom") is None
    assert parse_summary("noise\n" + json.dumps({"bestModel": "GBM"})) == {"bestModel": "GBM"}
    out = results_from_summary(
        {
            "leaderboard": [{"model": "NN_TORCH", "device": "cpu", "fellBackToCpu": True, "gpus": 1}],
            "best_model": "NN_TORCH",
        }
    )
    assert out["fallbacks"] == 1 and out["bestModel"] == "NN_TORCH"


def test_a_pod_deleted_from_a_running_group_retries_the_group() -> None:
    # rank 1 was deleted; rank 0 then exited 1 because its peer left: the deletion is the cause, so retry.
    pods = [pod(0, "Failed", exit=1, at="2025-01-01T11:59:59Z")]
    d = decide(observe(job_doc({"phase": "Running"}), pods))
    assert d.status["restarts"] == 1
    assert "qs-1 was deleted" in d.status["lastFailure"]
    pods = [pod(0), pod(1, deleting=True)]
    d = decide(observe(job_doc({"phase": "Running"}), pods))
    assert d.status["restarts"] == 1


def test_pods_missing_before_running_are_just_created() -> None:
    d = decide(observe(job_doc({"phase": "Pending"}), [pod(0)]))
    assert names(d.create) == ["qs-1"] and "restarts" not in d.status


def test_same_second_signal_beats_a_peer_exit_one() -> None:
    pods = [pod(0, "Failed", exit=1, at="t"), pod(1, "Failed", exit=143, at="t")]
    d = decide(observe(job_doc({"phase": "Running"}), pods))
    assert d.status["restarts"] == 1 and "code 143" in d.status["lastFailure"]
