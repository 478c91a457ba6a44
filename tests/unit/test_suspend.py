"""policy/suspend.py through decide: suspend deletes the pods and keeps the results."""

from __future__ import annotations

from tests.unit.decide_cases import cond, job_doc, names, observe, pod
from tests.unit.decided import decide


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
