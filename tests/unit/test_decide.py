"""decide.decide as a whole: creating children, reading progress and results, final states, spec edits, refused
children and statuses, ownership; one transition per test, from plain dicts (cases in decide_cases.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tabjob.controller.policy.decision import ChildFailure, rfc3339
from tests.unit.decide_cases import NOW, SUMMARY, cond, job_doc, names, observe, pod
from tests.unit.decided import decide


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


@pytest.mark.parametrize(
    ("status", "phase", "reason", "stalled"),
    [
        (422, "Failed", "CreateRejected", "True"),  # invalid name (a Service name may not start with a digit)
        (413, "Failed", "CreateRejected", "True"),  # a ConfigMap over 1 MiB
        (403, "Pending", "CreateForbidden", "True"),  # a ResourceQuota or RBAC: may pass later, with back-off
        (500, "Pending", "CreateRetrying", "False"),
        (404, "Pending", "CreateRetrying", "False"),  # a webhook's cache that has not seen the new namespace yet
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
