"""decide.decide: observed job and pods -> actions and status, one transition per test, from plain dicts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tabjob.api import parse_manifest
from tabjob.controller.config import Settings
from tabjob.controller.policy.builders import JobRef, build_children
from tabjob.controller.policy.decision import ChildFailure, Observed, rfc3339
from tabjob.controller.policy.kueue import attempt_of
from tabjob.controller.policy.results import parse_summary, plan_summary, results_from_summary
from tabjob.controller.policy.retry import retry_delay
from tabjob.errors import SpecError
from tabjob.planner import plan_job
from tests.unit.decided import decide

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
SUMMARY = {
    "bestModel": "WeightedEnsemble",
    "score": 0.99,
    "evalMetric": "roc_auc",
    "fitsDone": 6,
    "fitsFailed": 0,
    "models": [
        {"name": "WeightedEnsemble", "state": "Succeeded", "scoreVal": 0.99, "fitSeconds": 0.1, "device": "cpu"},
        {"name": "GBM", "state": "Succeeded", "scoreVal": 0.98, "fitSeconds": 1.5, "gpus": 0, "device": "cpu"},
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
    """Observed for `doc` and `pods`; keywords that name a Settings field (retry_base_delay, lost_pod_timeout,
    ...) set that setting, the others Observed's own fields."""
    settings = Settings(**{k: kw.pop(k) for k in list(kw) if k in Settings.__dataclass_fields__})
    status = doc.get("status") or {}
    try:
        job = parse_manifest({k: v for k, v in doc.items() if k != "status"})
        plan = plan_job(job)
        ref = JobRef("qs", "ns", "u1", int(doc["metadata"]["generation"]))
        desired = build_children(job, plan, ref, attempt_of(status), Settings())  # as the reconciler builds them
        plan_json, problems = plan_summary(plan.to_json_dict()), []
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
        settings=settings,
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
    if "waiting" in state:  # as the kubelet writes them
        cs["image"] = "registry.example/trainer:nope"
        cs["state"] = {"waiting": {"reason": state["waiting"], "message": state.get("why", "back-off pulling image")}}
    status: dict[str, Any] = {
        "phase": phase,
        "containerStatuses": [cs],
        "startTime": state.get("started", rfc3339(NOW)),
    }
    if state.get("unschedulable") or state.get("gated"):
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated" if state.get("gated") else "Unschedulable",
                    "message": state.get("unschedulable") or "Scheduling is blocked due to non-empty scheduling gates",
                    "lastTransitionTime": state.get("since", rfc3339(NOW)),
                }
            ],
        }
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"tabjob.dev/rank": str(index), "tabjob.dev/attempt": str(attempt)},
        "annotations": {"tabjob.dev/generation": str(state.get("generation", 1))},
    }
    if state.get("deleting"):  # True: deletion asked for at NOW (plus a grace period); else the timestamp itself
        meta["deletionTimestamp"] = rfc3339(NOW) if state["deleting"] is True else state["deleting"]
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


def test_kueue_gated_pods_are_queued_not_stalled() -> None:
    long_ago = rfc3339(NOW - timedelta(hours=3))
    d = decide(observe(job_doc({"phase": "Pending"}), [pod(0, gated=True, since=long_ago), pod(1, gated=True)]))
    assert d.status["phase"] == "Pending"
    assert cond(d.status, "Stalled")["status"] == "False"
    assert cond(d.status, "Reconciling")["reason"] == "Queued"


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


def test_summary_is_a_run_summary_or_nothing() -> None:
    assert parse_summary("Traceback...\nValueError: boom") is None
    assert parse_summary('{"best_model": "GBM"}') is None  # snake_case is not the contract
    assert parse_summary('{"bestModel": "GBM", "score": NaN}') is None
    summary = parse_summary(
        json.dumps(
            {
                "models": [{"name": "NN_TORCH", "state": "Succeeded", "device": "cpu", "fallback": True, "gpus": 1}],
                "bestModel": "NN_TORCH",
                "fallbacks": 1,
            }
        )
    )
    assert summary is not None
    out = results_from_summary(summary)
    assert out["fallbacks"] == 1 and out["bestModel"] == "NN_TORCH"
    assert out["models"] == [{"name": "NN_TORCH", "state": "Succeeded", "device": "cpu", "gpus": 1.0}]


def test_a_crashed_rank_log_tail_is_not_a_summary() -> None:
    pods = [pod(0, "Succeeded", exit=0, message="noise\n" + json.dumps(SUMMARY)), pod(1, "Succeeded", exit=0)]
    d = decide(observe(job_doc({"phase": "Running"}), pods))
    assert d.status["phase"] == "Succeeded" and "models" not in d.status


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


# ------------------------------------------------------------------ faults and hostile input, one decide table each


def edited(doc: dict[str, Any], generation: int) -> dict[str, Any]:
    doc["metadata"]["generation"] = generation
    return doc


def test_spec_edit_while_pending_replaces_old_generation_pods_before_observing_it() -> None:
    # Generation 2 (say, the GPU request removed from an unschedulable job): the generation-1 pods go first, and
    # observedGeneration stays at 1 until they are gone.
    status = {"phase": "Pending", "observedGeneration": 1, "startTime": rfc3339(NOW)}
    msg = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    old_pods = [pod(0, unschedulable=msg), pod(1, unschedulable=msg)]
    d = decide(observe(edited(job_doc(status), 2), old_pods, configmap_stale=True))
    assert sorted(d.delete_pods) == ["qs-0", "qs-1"] and d.create == []
    assert d.status["observedGeneration"] == 1
    assert [o["metadata"]["name"] for o in d.update] == ["qs-plan"]  # the plan ConfigMap is re-rendered too
    # Terminating: still not observed, nothing created over them.
    d = decide(observe(edited(job_doc(status), 2), [pod(0, deleting=True), pod(1, deleting=True)]))
    assert d.status["observedGeneration"] == 1 and d.create == []
    # Gone: new pods of generation 2, and now generation 2 is observed.
    d = decide(observe(edited(job_doc(status), 2), []))
    assert names(d.create) == ["qs-0", "qs-1"] and d.status["observedGeneration"] == 2
    assert {o["metadata"]["annotations"]["tabjob.dev/generation"] for o in d.create} == {"2"}


def test_resume_after_an_edit_rerenders_the_plan_configmap() -> None:
    status = {"phase": "Suspended", "observedGeneration": 1}
    d = decide(observe(edited(job_doc(status), 3), [], configmap_stale=True))
    assert [o["metadata"]["name"] for o in d.update] == ["qs-plan"]
    assert json.loads(d.update[0]["data"]["plan.json"])["worldSize"] == 2
    assert d.update[0]["metadata"]["annotations"]["tabjob.dev/generation"] == "3"


def test_a_non_retryable_failure_writes_failed_with_the_survivor_deletions() -> None:
    # The verdict and the deletions come in one decision; execute writes the verdict first (runtime test).
    pods = [pod(0), pod(1, "Failed", exit=2, message="bad data")]
    d = decide(observe(job_doc({"phase": "Running"}), pods))
    assert d.status["phase"] == "Failed" and d.delete_pods == ["qs-0"]
    # Had a crash deleted qs-0 before the verdict was written, the next pass would retry: hence the order.
    d = decide(observe(job_doc({"phase": "Running"}), [pod(1, "Failed", exit=2, message="bad data")]))
    assert d.status.get("restarts") == 1


@pytest.mark.parametrize(
    ("status", "phase", "reason", "stalled"),
    [
        (422, "Failed", "CreateRejected", "True"),  # invalid name (a Service name may not start with a digit)
        (413, "Failed", "CreateRejected", "True"),  # a ConfigMap over 1 MiB
        (403, "Pending", "CreateForbidden", "True"),  # a ResourceQuota or RBAC: may pass later, with back-off
        (500, "Pending", "CreateRetrying", "False"),
        (409, "Pending", "NameTaken", "True"),
    ],
)
def test_a_refused_child_becomes_a_condition_and_an_event(status: int, phase: str, reason: str, stalled: str) -> None:
    failure = ChildFailure("Service/qs", status, "Invalid", 'metadata.name: Invalid value: "1qs"')
    d = decide(observe(job_doc({"phase": "Pending"}), [pod(0, "Pending")], create_failure=failure))
    assert d.status["phase"] == phase and d.create == []
    assert cond(d.status, "Stalled")["status"] == stalled
    assert [(e.type, e.reason) for e in d.events][-1][1] == reason
    if phase == "Failed":
        assert "Service/qs" in d.status["message"] and d.delete_pods == ["qs-0"]
        # Final: the next pass keeps the verdict and creates nothing.
        d = decide(observe(job_doc(d.status), []))
        assert d.status["phase"] == "Failed" and d.create == [] and d.events == []


def test_a_refused_status_fails_the_job_with_the_smallest_status() -> None:
    status = {"phase": "Pending", "startTime": rfc3339(NOW)}
    message = "status.plan.pods: Too many: 65: must have at most 64 items"
    d = decide(observe(job_doc(status), [pod(0), pod(1)], status_rejected=message))
    assert d.status["phase"] == "Failed" and "plan" not in d.status and "progress" not in d.status
    assert cond(d.status, "Failed")["reason"] == "StatusRejected" and message in d.status["message"]
    assert sorted(d.delete_pods) == ["qs-0", "qs-1"] and d.create == []
    assert decide(observe(job_doc(d.status), [])).status["phase"] == "Failed"  # final: never retried


def test_children_of_another_owner_are_never_adopted() -> None:
    # A job deleted and recreated under the same name: the old job's pods still exist (their owner uid differs).
    d = decide(observe(job_doc(), [], have_configmap=False, foreign=["qs-0"]))
    assert d.create == [] and d.status["phase"] == "Pending"
    stalled = cond(d.status, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "NameTaken") and "qs-0" in stalled["message"]
    assert d.requeue_after is not None


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


def test_a_running_group_with_a_pod_on_a_lost_node_retries_then_fails_per_backoff_limit() -> None:
    pods = [pod(0), pod(1, deleting=True)]
    d = decide(observe(job_doc({"phase": "Running"}, backoffLimit=1), pods))
    assert d.status["restarts"] == 1 and d.status["phase"] == "Pending"
    pods = [pod(0, attempt=1), pod(1, attempt=1, deleting=True)]
    d = decide(observe(job_doc({"phase": "Running", "restarts": 1}, backoffLimit=1), pods))
    assert cond(d.status, "Failed")["reason"] == "BackoffLimitExceeded"


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
