"""policy/results.py: the trainer's RunSummary in a termination message, or nothing."""

from __future__ import annotations

import json

from tabjob.controller.policy.results import parse_summary, results_from_summary
from tests.unit.decide_cases import SUMMARY, job_doc, observe, pod
from tests.unit.decided import decide


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
