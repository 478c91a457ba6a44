"""A job's place in its LocalQueue from Kueue's visibility API: the answer's model and the pure `position`.

ANSWER is what Kueue v0.17.0 served on the test cluster for
GET /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/team-a-gpus/pendingworkloads (two pending
Workloads), with the Workloads renamed as TabularJob pod groups are named (<job>-<attempt>).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from tabjob.cli.status import waiting_in_queue
from tabjob.client.kueue_visibility import (
    PendingWorkloadsSummary,
    QueuePosition,
    describe,
    pending_workloads_path,
    position,
)

ANSWER: dict[str, Any] = {
    "kind": "PendingWorkloadsSummary",
    "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
    "metadata": {},
    "items": [
        {
            "metadata": {
                "name": "first-0",
                "namespace": "team-a",
                "creationTimestamp": "2026-11-26T00:47:24Z",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "first-0", "uid": "fbe26d38"}],
            },
            "priority": 100,
            "localQueueName": "team-a-gpus",
            "positionInClusterQueue": 0,
            "positionInLocalQueue": 0,
        },
        {
            "metadata": {
                "name": "other-2",
                "namespace": "team-a",
                "creationTimestamp": "2026-11-26T00:47:24Z",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "other-0-r2", "uid": "1efbf820"}],
            },
            "priority": 100,
            "localQueueName": "team-a-gpus",
            "positionInClusterQueue": 3,
            "positionInLocalQueue": 1,
        },
    ],
}


def summary(answer: dict[str, Any] = ANSWER) -> PendingWorkloadsSummary:
    return PendingWorkloadsSummary.model_validate(answer)


def test_the_path_names_the_version_namespace_and_queue() -> None:
    path = pending_workloads_path("v1beta2", "team-a", "team-a-gpus")
    assert path == "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/team-a-gpus/pendingworkloads"


def test_positions_count_from_one_and_name_the_workload() -> None:
    assert position(summary(), "other", "team-a") == QueuePosition(
        workload="other-2", in_local_queue=2, local_queue_pending=2, in_cluster_queue=4, priority=100
    )
    assert position(summary(), "first", "team-a") == QueuePosition("first-0", 1, 2, 1, 100)


def test_a_job_that_is_not_pending_has_no_position() -> None:
    assert position(summary(), "admitted-job", "team-a") is None
    assert position(summary({"items": []}), "other", "team-a") is None
    assert position(summary({"kind": "PendingWorkloadsSummary", "metadata": {}}), "other", "team-a") is None


def test_a_job_whose_name_prefixes_another_jobs_workload_is_not_matched() -> None:
    # other-2 is job "other", attempt 2; a job named "other-2" would own "other-2-<attempt>".
    assert position(summary(), "other-2", "team-a") is None
    assert position(summary(), "othe", "team-a") is None


def test_another_namespaces_workload_is_not_the_jobs() -> None:
    assert position(summary(), "other", "team-b") is None


def test_the_newest_attempt_wins_when_two_are_pending() -> None:
    answer = copy.deepcopy(ANSWER)
    answer["items"][0]["metadata"]["name"] = "other-3"
    pos = position(summary(answer), "other", "team-a")
    assert pos is not None and pos.workload == "other-3" and pos.in_local_queue == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [("positionInLocalQueue", None), ("positionInLocalQueue", -1), ("localQueueName", None), ("metadata", {})],
)
def test_an_answer_not_shaped_like_kueues_is_refused_naming_the_field(field: str, value: Any) -> None:
    answer = copy.deepcopy(ANSWER)
    if value is None:
        del answer["items"][1][field]
    else:
        answer["items"][1][field] = value
    with pytest.raises(ValidationError) as err:
        summary(answer)
    assert "items.1." in str(err.value)


def test_the_status_line_for_each_outcome() -> None:
    pos = position(summary(), "other", "team-a")
    assert describe("team-a-gpus", pos) == (
        "Position in LocalQueue team-a-gpus: 2 of 2 pending (4 in its ClusterQueue; Workload other-2, priority 100)"
    )
    assert "not pending" in describe("team-a-gpus", None)
    line = describe("team-a-gpus", None, unavailable="GET /apis/...: HTTP 503 Service Unavailable")
    assert line.startswith("Position in LocalQueue team-a-gpus: unknown") and "HTTP 503" in line
    assert "\n" not in line


def _job(queue: str | None, phase: str, admitted: str | None) -> dict[str, Any]:
    conds = [{"type": "Admitted", "status": admitted, "reason": "x"}] if admitted else []
    spec = {"scheduling": {"queueName": queue}} if queue else {}
    return {"metadata": {"name": "j", "namespace": "ns"}, "spec": spec, "status": {"phase": phase, "conditions": conds}}


def test_the_position_is_asked_only_for_a_queued_job_still_waiting() -> None:
    assert waiting_in_queue(_job("q", "Pending", "False")) == "q"
    assert waiting_in_queue(_job("q", "Pending", None)) == "q"  # the operator has not written the condition yet
    assert waiting_in_queue(_job("q", "Running", "True")) is None
    assert waiting_in_queue(_job("q", "Succeeded", "False")) is None
    assert waiting_in_queue(_job(None, "Pending", None)) is None
