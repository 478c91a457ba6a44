"""policy/retry.py through decide: which failures retry the whole group, the back-off, the limit, lost nodes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tabjob.contracts.results import MemoryNote, RunSummary
from tabjob.controller.policy.decision import rfc3339
from tabjob.controller.policy.retry import retry_delay
from tests.unit.decide_cases import NOW, cond, job_doc, names, observe, pod
from tests.unit.decided import decide


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


def test_backoff_limit_ends_the_retries() -> None:
    pods = [pod(0, "Failed", attempt=2, exit=137, reason="Error"), pod(1, attempt=2)]
    d = decide(observe(job_doc({"phase": "Running", "restarts": 2}, backoffLimit=2), pods))
    assert d.status["phase"] == "Failed"
    assert cond(d.status, "Failed")["reason"] == "BackoffLimitExceeded"


def test_an_oom_killed_pod_fails_the_job_at_once_with_the_advice() -> None:
    # Another attempt would meet the same limit: OutOfMemory is not retried, whatever backoffLimit allows.
    pods = [pod(0, "Failed", exit=137, reason="OOMKilled"), pod(1)]
    d = decide(observe(job_doc({"phase": "Running"}, backoffLimit=3), pods))
    assert d.status["phase"] == "Failed" and d.status.get("restarts", 0) == 0
    failed = cond(d.status, "Failed")
    assert failed["reason"] == "OutOfMemory"
    assert "ran out of memory" in failed["message"] and "processes" in failed["message"]
    assert d.delete_pods == ["qs-1"]


def test_an_oom_killed_pod_names_the_trainers_own_advice() -> None:
    note = MemoryNote(estimate_bytes=900 * 2**20, limit_bytes=2**30, advice="use processes: 4 on every model config")
    pods = [pod(0), pod(1, "Failed", exit=137, reason="OOMKilled", message=note.for_termination())]
    d = decide(observe(job_doc({"phase": "Running"}), pods))
    assert cond(d.status, "Failed")["reason"] == "OutOfMemory"
    assert "use processes: 4 on every model config" in cond(d.status, "Failed")["message"]


def test_a_memory_note_is_no_log_tail_for_another_failure() -> None:
    note = MemoryNote(estimate_bytes=1, limit_bytes=2, advice="x")
    pods = [pod(0), pod(1, "Failed", exit=1, message=note.for_termination())]
    d = decide(observe(job_doc({"phase": "Running"}, backoffLimit=0), pods))
    assert "estimateBytes" not in cond(d.status, "Failed")["message"]


def test_retry_delay_doubles_and_caps() -> None:
    assert [retry_delay(n, 10, 60) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 60, 60]


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


def test_a_non_retryable_failure_writes_failed_with_the_survivor_deletions() -> None:
    # The verdict and the deletions come in one decision; execute writes the verdict first (runtime test).
    pods = [pod(0), pod(1, "Failed", exit=2, message="bad data")]
    d = decide(observe(job_doc({"phase": "Running"}), pods))
    assert d.status["phase"] == "Failed" and d.delete_pods == ["qs-0"]
    # Had a crash deleted qs-0 before the verdict was written, the next pass would retry: hence the order.
    d = decide(observe(job_doc({"phase": "Running"}), [pod(1, "Failed", exit=2, message="bad data")]))
    assert d.status.get("restarts") == 1


def test_a_running_group_with_a_pod_on_a_lost_node_retries_then_fails_per_backoff_limit() -> None:
    pods = [pod(0), pod(1, deleting=True)]
    d = decide(observe(job_doc({"phase": "Running"}, backoffLimit=1), pods))
    assert d.status["restarts"] == 1 and d.status["phase"] == "Pending"
    pods = [pod(0, attempt=1), pod(1, attempt=1, deleting=True)]
    d = decide(observe(job_doc({"phase": "Running", "restarts": 1}, backoffLimit=1), pods))
    assert cond(d.status, "Failed")["reason"] == "BackoffLimitExceeded"


def _verdict(reason: str, error: str) -> str:
    return RunSummary(error=error, error_reason=reason).for_termination()


def test_the_trainers_verdict_is_the_cause_even_when_a_peer_exited_first() -> None:
    says = "s3://bucket/train/: access denied (HeadObject: HTTP 403); identity: access key AKIA...WXYZ"
    pods = [
        pod(0, "Failed", exit=2, at=rfc3339(NOW - timedelta(seconds=1)), message=_verdict("DataUnavailable", says)),
        pod(1, "Failed", exit=1, at=rfc3339(NOW - timedelta(seconds=3)), message="torchrun: ChildFailedError"),
    ]
    d = decide(observe(job_doc({"phase": "Running"}, backoffLimit=2), pods))
    failed = cond(d.status, "Failed")
    assert d.status["phase"] == "Failed" and failed["reason"] == "DataUnavailable", failed
    assert says in failed["message"] and d.status.get("restarts", 0) == 0  # a refusal is not retried


def test_a_retried_verdict_starts_a_new_attempt() -> None:
    pods = [pod(0, "Failed", exit=1, at="1", message=_verdict("OutputUnavailable", "s3://runs/x: store down"))]
    d = decide(observe(job_doc({"phase": "Running"}, backoffLimit=2), [*pods, pod(1)]))
    assert d.status["phase"] == "Pending" and d.status["restarts"] == 1, d.status


def test_a_peers_exit_waits_a_bounded_time_for_rank_zeros_verdict() -> None:
    peer = pod(1, "Failed", exit=1, at=rfc3339(NOW - timedelta(seconds=5)), message="torchrun: ChildFailedError")
    d = decide(observe(job_doc({"phase": "Running"}), [pod(0), peer]))
    assert d.status["phase"] == "Running" and "rank 0's verdict" in d.status["message"]
    assert d.delete_pods == [] and d.requeue_after == pytest.approx(25)
    late = pod(1, "Failed", exit=1, at=rfc3339(NOW - timedelta(seconds=31)), message="torchrun: ChildFailedError")
    d = decide(observe(job_doc({"phase": "Running"}), [pod(0), late]))
    assert d.status["phase"] == "Failed" and cond(d.status, "Failed")["reason"] == "NonZeroExit"
