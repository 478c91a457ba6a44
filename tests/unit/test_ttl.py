"""policy/ttl.py through decide: ttlSecondsAfterFinished."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tabjob.controller.policy.decision import rfc3339
from tests.unit.decide_cases import NOW, job_doc, observe
from tests.unit.decided import decide


@pytest.mark.parametrize(("age", "deleted"), [(30, False), (61, True)])
def test_ttl_after_finished(age: int, deleted: bool) -> None:
    status = {"phase": "Succeeded", "completionTime": rfc3339(NOW - timedelta(seconds=age)), "conditions": []}
    d = decide(observe(job_doc(status, ttlSecondsAfterFinished=60), []))
    assert d.delete_job is deleted
    assert d.create == []
    if not deleted:
        assert d.requeue_after == 30
