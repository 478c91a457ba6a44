"""A finished job's pods stuck Terminating on a lost node: gone after the same bound as a running job's.

Found by the chaos run tests/chaos/test_node_lost.py: a job failed (BackoffLimitExceeded) by a lost node kept
that node's pod Terminating for as long as the node stayed down, since a final verdict only deleted live pods.
"""

from __future__ import annotations

import json
from datetime import timedelta

from tabjob.controller.policy.decision import rfc3339
from tests.unit.decide_cases import NOW, SUMMARY, job_doc, observe, pod
from tests.unit.decided import decide


def test_a_failed_jobs_pod_stuck_on_a_lost_node_is_force_deleted_after_the_bound() -> None:
    status = {"phase": "Failed", "restarts": 1, "completionTime": rfc3339(NOW), "conditions": []}
    stuck = [pod(1, attempt=1, deleting=rfc3339(NOW - timedelta(seconds=100)))]
    d = decide(observe(job_doc(status, backoffLimit=1), stuck, lost_pod_timeout=300))
    assert d.force_delete == [] and d.requeue_after == 200  # within the bound: wait, and look again then
    d = decide(observe(job_doc(status, backoffLimit=1), stuck, now=NOW + timedelta(seconds=201), lost_pod_timeout=300))
    assert d.force_delete == ["qs-1-r1"]
    assert d.status["phase"] == "Failed" and d.create == []


def test_a_succeeded_jobs_finished_pods_are_kept_for_their_logs() -> None:
    status = {"phase": "Succeeded", "completionTime": rfc3339(NOW), "conditions": []}
    done = [pod(0, "Succeeded", exit=0, message=json.dumps(SUMMARY)), pod(1, "Succeeded", exit=0)]
    d = decide(observe(job_doc(status), done, now=NOW + timedelta(seconds=3600), lost_pod_timeout=300))
    assert d.force_delete == [] and d.delete_pods == []
