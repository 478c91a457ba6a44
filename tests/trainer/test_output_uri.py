"""spec.output.uri on a real S3 server (SeaweedFS): the run is copied as it goes, committed last, resumed from the
bucket by a fresh attempt, and read back by every reader exactly as a local run is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from hack.s3.seaweed import SeaweedS3
from tabjob.contracts.results import RunSummary
from tabjob_trainer.errors import DataError
from tabjob_trainer.storage.filesystems import StorageError
from tabjob_trainer.storage.run_reader import open_run
from tabjob_trainer.storage.runs import COMMIT, RunMirror
from tests.trainer.helpers import events, manifest, mixed_table, tabjob, write_manifest

pytestmark = pytest.mark.slow


def _objects(server: SeaweedS3, bucket: str, prefix: str) -> dict[str, int]:
    listed = server.client().list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix) :]: o["Size"] for o in listed}


def _job(tmp: Path, uri: str) -> Path:
    mixed_table(400, seed=3).to_csv(tmp / "train.csv", index=False)
    doc = manifest(
        str(tmp / "train.csv"),
        "label",
        {
            "GBM": [
                {"hyperparameters": {"num_boost_round": 30}},
                {"name": "GBMSmall", "hyperparameters": {"num_leaves": 4}},
            ]
        },
        bagging={"folds": 2},
        output={"uri": uri},
        export={"format": "mlserver"},
    )
    return write_manifest(tmp, doc)


def test_a_run_is_committed_to_the_bucket_resumed_from_it_and_read_back(
    tmp_path: Path, s3_server: SeaweedS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"s3://{s3_bucket}/runs/mixed/"
    job = _job(tmp_path, uri)
    first = tmp_path / "attempt-1"
    summary_file = tmp_path / "summary.json"  # what a pod's termination message would hold
    done = tabjob(
        "run", str(job), "--output-dir", str(first), "--quiet", env={"TABJOB_TERMINATION_LOG": str(summary_file)}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    objects = _objects(s3_server, s3_bucket, "runs/mixed/")
    commit = json.loads(s3_server.client().get_object(Bucket=s3_bucket, Key=f"runs/mixed/{COMMIT}")["Body"].read())
    # Exactly the run's files, each with its size, and the commit lists what the bucket holds.
    assert set(commit["files"]) == set(objects) - {COMMIT}
    assert all(objects[name] == size for name, size in commit["files"].items())
    for needed in (
        "leaderboard.json",
        "models.json",
        "preprocessing.json",
        "spec.json",
        "mlserver/model-settings.json",
    ):
        assert needed in commit["files"], needed
    summary = RunSummary.model_validate_json(summary_file.read_text())
    assert summary.output_uri == uri and summary.export_path == f"{uri.rstrip('/')}/mlserver"

    # A second attempt on a fresh pod (an empty local directory) resumes every finished fit from the bucket.
    second = tmp_path / "attempt-2"
    again = tabjob("run", str(job), "--output-dir", str(second), "--quiet")
    assert again.returncode == 0, again.stderr[-2000:]
    resumed = [e for e in events(second) if e.event == "FitResumed"]
    assert len(resumed) == 4 and not [e for e in events(second) if e.event == "FitStarted"]

    # Every reader takes the URI: predictions from the bucket equal those from the local run directory.
    monkeypatch.setenv("TABJOB_RUN_CACHE", str(tmp_path / "cache"))
    local_csv, bucket_csv = tmp_path / "local.csv", tmp_path / "bucket.csv"
    assert tabjob("predict", str(first), str(tmp_path / "train.csv"), "-o", str(local_csv)).returncode == 0
    read = tabjob("predict", uri, str(tmp_path / "train.csv"), "-o", str(bucket_csv))
    assert read.returncode == 0, read.stderr
    pd.testing.assert_frame_equal(pd.read_csv(local_csv), pd.read_csv(bucket_csv))


def test_an_unfinished_run_is_refused_by_readers(
    s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TABJOB_RUN_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DataError, match="not a finished run"):
        open_run(f"s3://{s3_bucket}/runs/never-committed/")


def _fake_run(root: Path) -> None:
    for fit in ("GBM-0-f0", "GBM-0-f1"):
        (root / "fits" / fit).mkdir(parents=True)
        (root / "fits" / fit / "model.txt").write_text(f"model of {fit}\n" * 100)
        (root / "fits" / fit / "result.json").write_text(json.dumps({"id": fit}))
    (root / "run.json").write_text('{"deadline": 1.0}')
    (root / "leaderboard.json").write_text("[]")


def test_the_store_down_while_the_run_is_written_leaves_it_uncommitted_and_the_next_attempt_finishes_it(
    tmp_path: Path, s3_server: SeaweedS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"s3://{s3_bucket}/runs/outage"
    local = tmp_path / "pod-1"
    _fake_run(local)
    mirror = RunMirror(uri, local)
    mirror.begin()
    mirror.sync()  # both fits reach the bucket in the background
    mirror._queue.join()
    assert {"fits/GBM-0-f0/result.json", "fits/GBM-0-f1/model.txt"} <= set(
        _objects(s3_server, s3_bucket, "runs/outage/")
    )

    # The store goes away before the commit: the run must not read as finished.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard port: connection refused
    monkeypatch.setenv("TABJOB_STORAGE_RETRIES", "2")
    down = RunMirror(uri, local)
    down._copied = dict(mirror._copied)
    with pytest.raises(StorageError) as failed:
        down.commit()
    assert failed.value.reason == "OutputUnavailable" and uri in str(failed.value)
    assert COMMIT not in _objects(s3_server, s3_bucket, "runs/outage/")

    # The next attempt, on another pod, restores the finished fits and commits.
    for key, value in s3_server.client_env().items():
        monkeypatch.setenv(key, value)
    fresh = tmp_path / "pod-2"
    retry = RunMirror(uri, fresh)
    assert retry.restore() == 2
    assert (fresh / "fits" / "GBM-0-f1" / "model.txt").read_text() == (
        local / "fits" / "GBM-0-f1" / "model.txt"
    ).read_text()
    assert (fresh / "run.json").exists()
    (fresh / "leaderboard.json").write_text("[]")
    files = retry.commit()
    assert COMMIT in _objects(s3_server, s3_bucket, "runs/outage/") and "leaderboard.json" in files


def test_a_fit_whose_copy_was_cut_short_is_not_restored(tmp_path: Path, s3_server: SeaweedS3, s3_bucket: str) -> None:
    client = s3_server.client()
    client.put_object(Bucket=s3_bucket, Key="runs/cut/fits/GBM-0-f0/model.txt", Body=b"half")  # no result.json
    client.put_object(Bucket=s3_bucket, Key="runs/cut/fits/GBM-0-f1/model.txt", Body=b"whole")
    client.put_object(Bucket=s3_bucket, Key="runs/cut/fits/GBM-0-f1/result.json", Body=b"{}")
    fresh = tmp_path / "pod"
    assert RunMirror(f"s3://{s3_bucket}/runs/cut", fresh).restore() == 1
    assert sorted(p.name for p in (fresh / "fits").iterdir()) == ["GBM-0-f1"]
    shutil.rmtree(fresh)


def test_wrong_keys_name_the_uri_and_the_identity(
    tmp_path: Path, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(StorageError) as refused:
        RunMirror(f"s3://{s3_bucket}/runs/x", tmp_path).restore()
    assert f"s3://{s3_bucket}/runs/x" in str(refused.value) and "AWS_ACCESS_KEY_ID" in str(refused.value)
