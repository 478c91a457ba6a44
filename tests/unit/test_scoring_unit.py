"""TabularPrediction without a cluster: the pure shard split, the API and its CRD, the builders, and decide."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabjob.api import crdgen
from tabjob.api.crdgen_prediction import FILE
from tabjob.api.errors import SpecError
from tabjob.api.prediction import LABEL_PREDICTION, TabularPredictionStatus
from tabjob.api.prediction_parse import parse_prediction
from tabjob.contracts.pod import KUEUE_GROUP_LABEL as KUEUE_GROUP
from tabjob.contracts.scoring import ScoringProgress, ScoringSummary, ShardFailure
from tabjob.controller.config import Settings
from tabjob.controller.policy.builders import JobRef
from tabjob.controller.policy.scoring_builders import build_scoring_pod, build_scoring_pods
from tabjob.controller.policy.scoring_decide import PredictionDecision, PredictionObserved, decide_prediction
from tabjob_trainer.scoring.shards import ShardPiece, assigned, shard_count, split

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
SETTINGS = Settings()


# ------------------------------------------------------------------------------------------------ shards


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=60), st.integers(1, 80))
def test_shards_are_contiguous_non_empty_runs_balanced_by_rows(weights: list[int], count: int) -> None:
    pieces = [ShardPiece(file=i // 3, row_group=i % 3, rows=w, weight=w) for i, w in enumerate(weights)]
    shards = split(pieces, count)
    assert len(shards) == min(count, len(pieces))
    assert [s.index for s in shards] == list(range(len(shards)))
    assert [p for s in shards for p in s.pieces] == pieces  # every piece once, in the dataset's order
    assert all(s.pieces for s in shards)
    even, largest = sum(weights) / len(shards), max(weights)
    assert max(s.weight for s in shards) <= even + largest


@given(st.integers(1, 500), st.integers(1, 64))
def test_pods_take_every_shard_once_round_robin(shards: int, parallelism: int) -> None:
    shares = [assigned(shards, parallelism, pod) for pod in range(parallelism)]
    assert sorted(k for share in shares for k in share) == list(range(shards))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_shard_count_keeps_shards_under_a_million_rows_and_never_splits_a_piece() -> None:
    assert shard_count(pieces=100, parallelism=3, rows=1_000) == 12
    assert shard_count(pieces=100, parallelism=3, rows=40_000_000) == 40
    assert shard_count(pieces=5, parallelism=3, rows=40_000_000) == 5
    assert shard_count(pieces=1, parallelism=1, rows=None) == 1


def test_a_summary_fits_a_termination_message() -> None:
    failures = [ShardFailure(shard=i, error="x" * 600) for i in range(40)]
    text = ScoringSummary(pod=0, failures=failures, error="e" * 5000).for_termination()
    assert len(text.encode()) <= 4000
    back = ScoringSummary.model_validate_json(text)
    assert back.error and len(back.error) == 1000 and 0 < len(back.failures) <= 8


# ------------------------------------------------------------------------------------------------ API and CRD


def manifest(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": {"job": "credit-risk"},
        "data": "s3://bucket/applications/2026-11-27/",
        "output": {"uri": "s3://bucket/scores/2026-11-27/"},
        "passthroughColumns": ["application_id"],
        "parallelism": 3,
        "resources": {"cpus": 2, "memory": "4Gi"},
    }
    body.update(spec)
    return {"apiVersion": "tabjob.dev/v1alpha1", "kind": "TabularPrediction", "metadata": {"name": "nightly"},
            "spec": body}  # fmt: skip


def test_the_issue_s_sketch_parses_and_bad_fields_are_named() -> None:
    tp = parse_prediction(manifest(scheduling={"queueName": "batch"}))
    assert tp.spec.parallelism == 3 and tp.spec.scheduling.queue_name == "batch"
    cases: dict[str, dict[str, Any]] = {
        "spec.model": {"model": {"job": "a", "uri": "s3://bucket/run/"}},
        "spec.data": {"data": "/local/path"},
        "spec.parallelism": {"parallelism": 65},
        "spec.passthroughColumns": {"passthroughColumns": ["id", "id"]},
        "spec.output.overwrite": {"output": {"uri": "s3://bucket/x/", "overwrite": "yes"}},
        "spec.paralelism": {"paralelism": 2},
    }
    for path, spec in cases.items():
        with pytest.raises(SpecError) as caught:
            parse_prediction(manifest(**spec))
        assert any(line.startswith(path) for line in caught.value.lines()), caught.value.lines()


def test_the_prediction_crd_matches_the_models_and_drift_is_caught(tmp_path: Path) -> None:
    committed, chart = ROOT / "crds" / FILE, ROOT / "charts" / "tabjob" / "crds" / FILE
    assert crdgen.main(["--kind", "TabularPrediction", "--check", str(committed), str(chart)]) == 0, "make crds"
    stale = tmp_path / FILE
    stale.write_text(committed.read_text().replace("- tp", "- tpx"))
    assert crdgen.main(["--kind", "TabularPrediction", "--check", str(stale)]) == 1
    # The job's CRD is not the prediction's.
    assert crdgen.main(["--check", str(committed)]) == 1


# ------------------------------------------------------------------------------------------------ builders


REF = JobRef("nightly", "ml", "uid-1")


def test_scoring_pods_run_the_scoring_entry_point_with_the_spec_as_arguments() -> None:
    tp = parse_prediction(
        manifest(scheduling={"queueName": "batch"}, output={"uri": "s3://bucket/o/", "overwrite": True})
    )
    pods = build_scoring_pods(tp, REF, "s3://runs/credit/", SETTINGS)
    assert [p["metadata"]["name"] for p in pods] == ["nightly-0", "nightly-1", "nightly-2"]
    pod = pods[1]
    c = pod["spec"]["containers"][0]
    assert c["command"] == ["python", "-m", "tabjob_trainer.scoring"]
    assert c["args"] == [
        "--model", "s3://runs/credit/", "--data", "s3://bucket/applications/2026-11-27/", "--output", "s3://bucket/o/",
        "--passthrough", "application_id", "--parallelism", "3", "--index", "1", "--owner", "uid-1",
        "--progress-port", str(SETTINGS.progress_port), "--overwrite",
    ]  # fmt: skip
    assert c["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    labels = pod["metadata"]["labels"]
    assert labels[LABEL_PREDICTION] == "nightly" and labels["tabjob.dev/job-name"] == "nightly"
    assert (
        labels[KUEUE_GROUP] == "nightly"
        and pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3"
    )
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "TabularPrediction"
    assert pod["spec"]["automountServiceAccountToken"] is False and pod["spec"]["restartPolicy"] == "Never"
    assert build_scoring_pod(tp, REF, "s3://r/", 2, 3, SETTINGS)["metadata"]["name"] == "nightly-2-r2"


# ------------------------------------------------------------------------------------------------ decide


_KNOWN = {f.alias or n for n, f in TabularPredictionStatus.model_fields.items()}


def decide(obs: PredictionObserved) -> PredictionDecision:
    d = decide_prediction(obs)
    assert not set(d.status) - _KNOWN, sorted(set(d.status) - _KNOWN)
    TabularPredictionStatus.model_validate(d.status)
    return d


def tp_obj(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    doc = manifest(**spec)
    doc["metadata"].update(namespace="ml", uid="uid-1", generation=1, resourceVersion="1")
    if status is not None:
        doc["status"] = status
    return doc


def job(phase: str = "Succeeded", uri: str | None = "s3://runs/credit/") -> dict[str, Any]:
    spec = {"output": {"uri": uri}} if uri else {"output": {}}
    return {"metadata": {"name": "credit-risk"}, "spec": spec, "status": {"phase": phase, "outputUri": uri}}


def observed(tp: dict[str, Any], pods: list[dict[str, Any]] | None = None, **kw: Any) -> PredictionObserved:
    parsed = parse_prediction({k: v for k, v in tp.items() if k != "status"})

    def desired(index: int, created: int, model: str) -> dict[str, Any]:
        return build_scoring_pod(parsed, REF, model, index, created, SETTINGS)

    kw.setdefault("model_job", job())
    return PredictionObserved(tp=tp, pods=pods or [], now=NOW, desired=desired, **kw)


def pod(name: str, index: int, phase: str, message: str | None = None, code: int = 0) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "podIP": "10.0.0.1"}
    if message is not None:
        status["containerStatuses"] = [{"state": {"terminated": {"exitCode": code, "message": message}}}]
    meta = {"name": name, "labels": {"tabjob.dev/index": str(index)}, "ownerReferences": [{"uid": "uid-1"}]}
    return {"metadata": meta, "status": status}


def cond(d: PredictionDecision, ctype: str) -> dict[str, Any]:
    return next(c for c in d.status["conditions"] if c["type"] == ctype)


def test_a_new_prediction_creates_its_pods_from_the_job_s_committed_run() -> None:
    d = decide(observed(tp_obj()))
    assert [p["metadata"]["name"] for p in d.create] == ["nightly-0", "nightly-1", "nightly-2"]
    assert d.create[0]["spec"]["containers"][0]["args"][1] == "s3://runs/credit/"
    assert d.status["created"] == [1, 1, 1] and d.status["phase"] == "Pending" and d.status["startTime"]


@pytest.mark.parametrize(
    ("model_job", "reason", "words"),
    [
        (None, "ModelNotFound", "no TabularJob 'credit-risk'"),
        (job("Running"), "ModelNotReady", "is Running, not a finished run"),
        (job(uri=None), "ModelNotInObjectStorage", "spec.output.uri"),
    ],
)
def test_a_model_that_cannot_score_fails_before_any_pod(model_job: Any, reason: str, words: str) -> None:
    d = decide(observed(tp_obj(), model_job=model_job))
    assert not d.create and d.status["phase"] == "Failed"
    assert cond(d, "Failed")["reason"] == reason and words in d.status["message"]


RUNNING = {"phase": "Running", "created": [1, 1, 1], "startTime": "2026-11-27T11:59:00Z", "conditions": []}


def test_a_preflight_refusal_fails_the_prediction_naming_the_columns() -> None:
    refusal = ScoringSummary(pod=0, error="the model needs column(s) 'income'", error_reason="MissingColumns")
    pods = [pod("nightly-0", 0, "Failed", refusal.for_termination(), 1), pod("nightly-1", 1, "Running")]
    d = decide(observed(tp_obj(copy.deepcopy(RUNNING)), [*pods, pod("nightly-2", 2, "Running")]))
    assert d.status["phase"] == "Failed" and cond(d, "Failed")["reason"] == "MissingColumns"
    assert "'income'" in d.status["message"] and set(d.delete_pods) == {"nightly-1", "nightly-2"}


def test_a_lost_pod_is_replaced_alone_once_the_api_server_confirms_it_is_gone() -> None:
    pods = [pod("nightly-0", 0, "Running"), pod("nightly-2", 2, "Running")]
    first = decide(observed(tp_obj(copy.deepcopy(RUNNING)), pods))
    assert first.list_pods and not first.create  # the cache may lag: list before counting a pod lost
    d = decide(observed(tp_obj(copy.deepcopy(RUNNING)), pods, pods_listed=True))
    assert [p["metadata"]["name"] for p in d.create] == ["nightly-1-r1"]
    assert d.status["created"] == [1, 2, 1] and d.status["restarts"] == 1 and "disappeared" in d.status["lastFailure"]


def test_a_crashed_pod_is_replaced_within_the_backoff_limit_then_the_prediction_fails() -> None:
    crashed = [
        pod("nightly-0", 0, "Running"),
        pod("nightly-1", 1, "Failed", "Killed", 137),
        pod("nightly-2", 2, "Running"),
    ]
    d = decide(observed(tp_obj(copy.deepcopy(RUNNING)), crashed))
    assert [p["metadata"]["name"] for p in d.create] == ["nightly-1-r1"] and "nightly-1" in d.delete_pods
    worn = {**RUNNING, "failures": 3}
    d = decide(observed(tp_obj(copy.deepcopy(worn)), crashed))
    assert d.status["phase"] == "Failed" and cond(d, "Failed")["reason"] == "BackoffLimitExceeded"


def _done(index: int, rows: int, failures: list[ShardFailure] | None = None, marker: bool = False) -> dict[str, Any]:
    s = ScoringSummary(pod=index, plan_shards=12, plan_rows=3000, shards_total=4, shards_done=4 - len(failures or []),
                       rows_done=rows, rows_scored=rows, seconds_scoring=2.0, failures=failures or [],
                       shards_failed=len(failures or []), success_marker=marker)  # fmt: skip
    return pod(f"nightly-{index}", index, "Succeeded", s.for_termination())


def test_progress_while_running_and_the_verdict_when_every_pod_succeeded() -> None:
    live = {0: ScoringProgress(pod=0, plan_shards=12, plan_rows=3000, shards_total=4, shards_done=2, rows_done=500,
                               rows_scored=500, seconds_scoring=5.0).model_dump()}  # fmt: skip
    pods = [pod("nightly-0", 0, "Running"), _done(1, 1000), pod("nightly-2", 2, "Running")]
    d = decide(observed(tp_obj(copy.deepcopy(RUNNING)), pods, progress=live))
    s = d.status
    assert (s["phase"], s["rowsScored"], s["rowsTotal"], s["shardsTotal"], s["shardsDone"]) == (
        "Running",
        1500,
        3000,
        12,
        6,
    )
    assert s["rowsPerSecond"] == 300.0 and s["etaSeconds"] == 5 and s["progress"] == "1500/3000 (50%)"
    assert d.read_progress and "ETA 5 s" in s["message"]

    done = [_done(0, 1000), _done(1, 1000), _done(2, 1000, marker=True)]
    d = decide(observed(tp_obj(copy.deepcopy(RUNNING)), done))
    assert d.status["phase"] == "Succeeded" and cond(d, "Ready")["status"] == "True"
    assert "3000 rows scored into 12 part file(s)" in d.status["message"] and d.status["completionTime"]


def test_shards_the_model_cannot_take_fail_the_prediction_with_their_errors() -> None:
    bad = [ShardFailure(shard=7, error="shard 7: row 158 of s3://b/d/part-2.parquet, column 'x1': 'n/a'")]
    done = [_done(0, 1000), _done(1, 750, bad), _done(2, 1000)]
    d = decide(observed(tp_obj(copy.deepcopy(RUNNING)), done))
    assert d.status["phase"] == "Failed" and cond(d, "Failed")["reason"] == "ShardsFailed"
    assert d.status["shardsFailed"] == 1 and d.status["failedShards"] == [{"shard": 7, "error": bad[0].error}]
    assert "column 'x1'" in d.status["message"]


def test_a_verdict_stands_and_its_ttl_deletes_the_prediction() -> None:
    over = {"phase": "Succeeded", "completionTime": "2026-11-27T11:00:00Z", "conditions": []}
    d = decide(observed(tp_obj(over, runPolicy={"ttlSecondsAfterFinished": 60})))
    assert d.delete_job and not d.create
    d = decide(observed(tp_obj(dict(over, completionTime=(NOW - timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%SZ")),
                               runPolicy={"ttlSecondsAfterFinished": 60})))  # fmt: skip
    assert not d.delete_job and d.requeue_after == pytest.approx(50)
