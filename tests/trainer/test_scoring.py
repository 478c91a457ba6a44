"""Batch scoring on a real S3 server (SeaweedFS): shards of a multi-part dataset scored by several pods' workers,
committed part by part, resumed, and every bad input refused with its reason before a row is scored."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hack.s3.seaweed import SeaweedS3
from tabjob.contracts.scoring import ScoringSummary
from tabjob_trainer.scoring.preflight import Request, ScoringError, preflight
from tabjob_trainer.scoring.store import PLAN, SUCCESS, OutputStore, part_name
from tabjob_trainer.scoring.worker import Scorer
from tests.trainer.helpers import manifest, mixed_table, tabjob, write_manifest

pytestmark = pytest.mark.slow
FILES, ROWS, GROUP = 4, 300, 100


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("scoring-run")
    mixed_table(400, seed=3).to_csv(tmp / "train.csv", index=False)
    job = write_manifest(tmp, manifest(str(tmp / "train.csv"), "label", {"GBM": [{"hyperparameters": {}}]}))
    done = tabjob("run", str(job), "--output-dir", str(tmp / "run"), "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    return tmp / "run"


def _put(server: SeaweedS3, bucket: str, key: str, body: bytes) -> None:
    server.client().put_object(Bucket=bucket, Key=key, Body=body)


def _parquet(frame: pd.DataFrame) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink, row_group_size=GROUP)
    return sink.getvalue()


def upload_run(server: SeaweedS3, bucket: str, run: Path, prefix: str = "run", commit: bool = True) -> str:
    """The run as a committed run in the bucket (its files, then the commit object listing them)."""
    files = {str(p.relative_to(run)): p.stat().st_size for p in run.rglob("*") if p.is_file()}
    for rel in files:
        _put(server, bucket, f"{prefix}/{rel}", (run / rel).read_bytes())
    if commit:
        _put(server, bucket, f"{prefix}/_COMMITTED.json", json.dumps({"files": files}).encode())
    return f"s3://{bucket}/{prefix}/"


def upload_data(server: SeaweedS3, bucket: str, prefix: str = "data", bad: int | None = None) -> pd.DataFrame:
    """FILES Parquet part files of ROWS rows in row groups of GROUP, with an id; `bad`: that file's x1 is text."""
    frames = []
    for i in range(FILES):
        frame = mixed_table(ROWS, seed=20 + i).drop(columns=["label"]).assign(id=range(i * ROWS, (i + 1) * ROWS))
        if bad is not None:  # the column is text everywhere (a CSV export), numbers except one cell of one file
            frame["x1"] = frame["x1"].map(lambda v: f"{v:.6f}")
            if i == bad:
                frame.loc[157, "x1"] = "n/a (pending)"
        frames.append(frame)
        _put(server, bucket, f"{prefix}/part-{i}.parquet", _parquet(frame))
    _put(server, bucket, f"{prefix}/_SUCCESS", b"")  # a Spark writer's marker, skipped
    return pd.concat(frames, ignore_index=True)


def read_parts(server: SeaweedS3, bucket: str, prefix: str) -> pd.DataFrame:
    listed = server.client().list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/part-")["Contents"]
    keys = sorted(o["Key"] for o in listed)
    frames = [
        pd.read_parquet(io.BytesIO(server.client().get_object(Bucket=bucket, Key=k)["Body"].read())) for k in keys
    ]
    return pd.concat(frames, ignore_index=True)


def predicted(run: Path, data: str, tmp: Path) -> pd.DataFrame:
    done = tabjob("predict", str(run), data, "--output", str(tmp / "predict.csv"))
    assert done.returncode == 0, done.stderr
    return pd.read_csv(tmp / "predict.csv")


def pods(req: Request, parallelism: int) -> list[ScoringSummary]:
    """What `parallelism` pods do: pod 0's preflight writes the plan, then each pod scores its share."""
    store = OutputStore(req.output)
    plan, _ = preflight(Request(**{**req.__dict__, "parallelism": parallelism}), store)
    return [Scorer(plan, store, pod=i, log=False).run() for i in range(parallelism)]


def test_three_pods_score_a_multipart_dataset_into_parts_equal_to_predict(
    run_dir: Path, s3_server: SeaweedS3, s3_bucket: str, tmp_path: Path
) -> None:
    model = upload_run(s3_server, s3_bucket, run_dir)
    rows = upload_data(s3_server, s3_bucket)
    req = Request(model, f"s3://{s3_bucket}/data/", f"s3://{s3_bucket}/scores/", ("id",), owner="uid-1")
    summaries = pods(req, 3)
    assert sum(s.rows_scored for s in summaries) == FILES * ROWS
    assert [s.success_marker for s in summaries] == [False, False, True]  # the last to finish sees every part
    parts = read_parts(s3_server, s3_bucket, "scores")
    assert list(parts["id"]) == list(rows["id"])  # part files in name order keep the dataset's row order
    expected = predicted(run_dir, f"s3://{s3_bucket}/data/", tmp_path)
    pd.testing.assert_frame_equal(parts.drop(columns=["id"]), expected, check_dtype=False)
    marker = json.loads(s3_server.client().get_object(Bucket=s3_bucket, Key=f"scores/{SUCCESS}")["Body"].read())
    assert marker["rows"] == FILES * ROWS and len(marker["parts"]) == summaries[0].plan_shards == 12

    # `tabjob score`, the one-machine form (one pod: 4 shards), takes the same inputs and writes the same rows.
    out = f"s3://{s3_bucket}/cli/"
    done = tabjob("score", model, f"s3://{s3_bucket}/data/", "--output", out, "--passthrough", "id", "-q")
    assert done.returncode == 0, done.stderr
    assert "scored 1200 rows into 4 part file(s)" in done.stdout and "wrote _SUCCESS" in done.stdout
    pd.testing.assert_frame_equal(read_parts(s3_server, s3_bucket, "cli"), parts)


def test_a_retried_pod_skips_the_shards_already_committed(run_dir: Path, s3_server: SeaweedS3, s3_bucket: str) -> None:
    model = upload_run(s3_server, s3_bucket, run_dir)
    upload_data(s3_server, s3_bucket)
    req = Request(model, f"s3://{s3_bucket}/data/", f"s3://{s3_bucket}/scores/", ("id",), owner="uid-2")
    store = OutputStore(req.output)
    plan, _ = preflight(Request(**{**req.__dict__, "parallelism": 2}), store)
    first = Scorer(plan, store, pod=1, log=False).run()
    assert len(plan.shards) == 8 and first.shards_done == 4 and not first.success_marker  # shards 1, 3, 5, 7
    before = {o["Key"]: o["ETag"] for o in s3_server.client().list_objects_v2(Bucket=s3_bucket)["Contents"]}
    # Pod 1 preempted after its second shard: its later parts were never committed.
    for shard in (5, 7):
        store.delete(part_name(shard))
    again, finished = preflight(Request(**{**req.__dict__, "parallelism": 2}), store)  # pod 0 retried: resumes
    assert again.fingerprint == plan.fingerprint and not finished
    retried = Scorer(again, store, pod=1, log=False).run()
    redone = sum(plan.shards[k].rows or 0 for k in (5, 7))
    assert (retried.shards_skipped, retried.rows_scored, retried.shards_done) == (2, redone, 4)
    after = {o["Key"]: o["ETag"] for o in s3_server.client().list_objects_v2(Bucket=s3_bucket)["Contents"]}
    for shard in (1, 3):  # committed parts are kept as they were, never written again
        assert after[f"scores/{part_name(shard)}"] == before[f"scores/{part_name(shard)}"]
    last = Scorer(again, store, pod=0, log=False).run()
    assert last.success_marker and store.read(SUCCESS)


def _refusal(req: Request) -> ScoringError:
    with pytest.raises(ScoringError) as caught:
        preflight(req, OutputStore(req.output))
    return caught.value


def test_every_bad_input_is_refused_before_a_row_is_scored(run_dir: Path, s3_server: SeaweedS3, s3_bucket: str) -> None:
    model = upload_run(s3_server, s3_bucket, run_dir)
    upload_data(s3_server, s3_bucket)
    data, out = f"s3://{s3_bucket}/data/", f"s3://{s3_bucket}/scores/"

    unfinished = upload_run(s3_server, s3_bucket, run_dir, prefix="training", commit=False)
    e = _refusal(Request(unfinished, data, out))
    assert e.reason == "ModelNotReady" and "not a finished run (no _COMMITTED.json)" in str(e)

    # A dataset without a column the model needs: every missing one named, and what the data has.
    frame = mixed_table(50, seed=1).drop(columns=["label", "colour", "x2"])
    _put(s3_server, s3_bucket, "narrow/part-0.parquet", _parquet(frame))
    e = _refusal(Request(model, f"s3://{s3_bucket}/narrow/", out))
    assert e.reason == "MissingColumns" and "'x2', 'colour'" in str(e) and "it has 'x1'" in str(e), e
    e = _refusal(Request(model, data, out, passthrough=("customer",)))
    assert e.reason == "MissingColumns" and "'customer'" in str(e)

    _put(s3_server, s3_bucket, "empty/_SUCCESS", b"")
    e = _refusal(Request(model, f"s3://{s3_bucket}/empty/", out))
    assert e.reason == "NoData" and "no data files under it" in str(e) and "_SUCCESS" in str(e)

    # An output that holds a finished result: refused, unless overwrite.
    pods(Request(model, data, out, owner="first"), 1)
    e = _refusal(Request(model, data, out, owner="second"))
    assert e.reason == "OutputExists" and "already holds a finished result (1200 rows" in str(e)
    assert OutputStore(out).read(SUCCESS)  # the refusal lost nothing
    summaries = pods(Request(model, data, out, owner="second", overwrite=True), 1)
    assert summaries[0].rows_scored == 1200 and summaries[0].success_marker
    assert pods(Request(model, data, out, owner="second"), 1)[0].rows_scored == 0  # its own result: done


def test_a_shard_the_model_cannot_take_fails_alone_naming_the_row_and_column(
    run_dir: Path, s3_server: SeaweedS3, s3_bucket: str
) -> None:
    model = upload_run(s3_server, s3_bucket, run_dir)
    upload_data(s3_server, s3_bucket, bad=2)
    req = Request(model, f"s3://{s3_bucket}/data/", f"s3://{s3_bucket}/scores/", ("id",), owner="uid-3")
    summaries = pods(req, 2)
    failures = [f for s in summaries for f in s.failures]
    assert len(failures) == 1, failures
    # File 2's row 158 (157 counted from 0) lies in its second row group, piece 7 of 12, of shard 4 of 8.
    assert failures[0].shard == 4
    assert failures[0].error == (
        f"shard 4: row 158 of s3://{s3_bucket}/data/part-2.parquet, column 'x1': 'n/a (pending)' is not a number; "
        "the model was trained on numbers there (a missing value is an empty cell)"
    )
    store = OutputStore(req.output)
    assert store.parts() == set(range(8)) - {4} and store.read(SUCCESS) is None
    assert not any(s.success_marker for s in summaries)


def test_the_pod_entry_point_writes_its_summary_as_the_termination_message(
    run_dir: Path, s3_server: SeaweedS3, s3_bucket: str, tmp_path: Path
) -> None:
    model = upload_run(s3_server, s3_bucket, run_dir)
    upload_data(s3_server, s3_bucket)
    term = tmp_path / "termination-log"
    argv = [sys.executable, "-m", "tabjob_trainer.scoring", "--model", model, "--data", f"s3://{s3_bucket}/data/",
            "--output", f"s3://{s3_bucket}/scores/", "--passthrough", "id", "--owner", "uid-4"]  # fmt: skip
    env_term = {"TABJOB_TERMINATION_LOG": str(term)}
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env_term}, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = ScoringSummary.model_validate_json(term.read_text())
    assert (summary.rows_done, summary.shards_done, summary.success_marker) == (1200, 4, True)
    assert OutputStore(f"s3://{s3_bucket}/scores/").read(PLAN)
    refused = subprocess.run(
        [*argv[:-1], "uid-5"], capture_output=True, text=True, env={**os.environ, **env_term}, timeout=300
    )
    assert refused.returncode == 1
    verdict = ScoringSummary.model_validate_json(term.read_text())
    assert verdict.error_reason == "OutputExists" and verdict.rows_done == 0
