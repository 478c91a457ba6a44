"""policy/platform.py through decide: a job that breaches the platform's policy gets nothing, not even its plan
ConfigMap, and is Stalled with reason PolicyViolation until the spec or the policy changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tabjob.api.platform_policy import Policy, PolicyError
from tabjob.controller.config import Settings
from tabjob.controller.runtime.reconciler import PolicySource
from tests.unit.decide_cases import cond, job_doc, names, observe, pod
from tests.unit.decided import decide


def _breach(status: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = job_doc(status)
    doc["spec"]["scheduling"] = {"priorityClassName": "system-node-critical", "tolerations": [{"operator": "Exists"}]}
    return doc


def test_a_breach_creates_nothing_and_stalls() -> None:
    d = decide(observe(_breach(), [], have_configmap=False, have_service=False))
    assert d.create == [] and d.delete_pods == []
    assert d.status["phase"] == "Pending"
    stalled = cond(d.status, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "PolicyViolation")
    message = d.status["message"]
    assert "spec.scheduling.priorityClassName: system-node-critical is not allowed" in message
    assert "spec.scheduling.tolerations[0].key: a toleration without a key" in message
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "PolicyViolation")]
    assert d.requeue_after is not None  # widening the policy needs no edit of the job


def test_the_same_job_runs_once_the_policy_allows_it() -> None:
    policy = Policy(priority_classes=("system-node-critical",), toleration_keys=("*",))
    stalled = decide(observe(_breach(), [], have_configmap=False, have_service=False)).status
    d = decide(observe(_breach(stalled), [], have_configmap=False, have_service=False, policy=policy))
    assert [o["kind"] for o in d.create] == ["ConfigMap", "Service", "Pod", "Pod"]
    assert d.status["phase"] == "Pending" and cond(d.status, "Stalled")["status"] == "False"


def test_an_allowed_job_is_untouched_by_the_policy() -> None:
    d = decide(observe(job_doc(), []))
    assert names(d.create) == ["qs-0", "qs-1"]


def test_running_pods_are_left_alone_when_the_policy_tightens() -> None:
    running = {"phase": "Running", "startTime": "2025-01-01T11:00:00Z", "observedGeneration": 1}
    d = decide(observe(_breach(running), [pod(0), pod(1)]))
    assert d.status["phase"] == "Running" and d.delete_pods == []


def test_a_spec_the_api_server_should_have_refused_fails_as_invalid() -> None:
    # A CRD older than spec.env's CEL rule would admit this; the operator's own parse refuses it.
    doc = job_doc()
    doc["spec"]["env"] = [{"name": "MASTER_ADDR", "value": "evil.example"}]
    d = decide(observe(doc, []))
    assert d.create == [] and d.status["phase"] == "Failed"
    assert cond(d.status, "Stalled")["reason"] == "InvalidSpec"
    assert "spec.env[0].name: MASTER_ADDR is set by tabjob itself" in d.status["message"]


def test_the_operator_reads_the_mounted_policy_again(tmp_path: Path) -> None:
    for key, value in Policy().to_data().items():
        (tmp_path / key).write_text(value)
    source = PolicySource(Settings(policy_dir=str(tmp_path), policy_reload=0.0))
    assert source.current() == Policy()
    (tmp_path / "serviceAccounts").write_text("default,s3-reader")  # an edit of the ConfigMap, as the kubelet lands it
    assert source.current().service_accounts == ("default", "s3-reader")
    (tmp_path / "maxCpus").write_text("many")  # unreadable: the last good policy stays
    assert source.current().service_accounts == ("default", "s3-reader")


def test_without_a_mount_the_chart_s_defaults_apply_and_a_bad_mount_stops_the_start(tmp_path: Path) -> None:
    assert PolicySource(Settings(policy_dir="")).current() == Policy()
    with pytest.raises(PolicyError, match="no such directory"):
        PolicySource(Settings(policy_dir=str(tmp_path / "absent")))
