"""A store that fails for a while, for good, or goes silent (tests/s3proxy.py in front of SeaweedFS): a bounded
number of attempts with backoff, then one line that says what happened and how often it was tried; a read that
succeeds when the store recovers within that budget; never a hang."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hack.s3.seaweed import SeaweedS3
from tabjob_trainer.dataset import read_table
from tabjob_trainer.storage.datasets import open_dataset, read
from tabjob_trainer.storage.filesystems import StorageError, filesystem
from tests.s3proxy import FaultyProxy

ATTEMPTS = 3


@pytest.fixture
def table_uri(s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A two-file Parquet dataset on the server; TABJOB_STORAGE_RETRIES and TABJOB_STORAGE_TIMEOUT kept short."""
    uri = f"s3://{s3_bucket}/t"
    fs, root = filesystem(uri)
    for i in range(2):
        pq.write_table(pa.table({"x": [float(i), 2.0], "y": ["p", "q"]}), f"{root}/part-{i}.parquet", filesystem=fs)
    monkeypatch.setenv("TABJOB_STORAGE_RETRIES", str(ATTEMPTS))
    monkeypatch.setenv("TABJOB_STORAGE_TIMEOUT", "1")
    return uri


def test_503_is_retried_a_bounded_number_of_times_then_fails_clearly(
    table_uri: str, s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FaultyProxy(s3_server.endpoint, fail=1000) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        started = time.monotonic()
        with pytest.raises(StorageError) as exc:
            read_table(table_uri)
        assert time.monotonic() - started < 30
        assert proxy.count() == ATTEMPTS, proxy.requests
    assert exc.value.reason == "DataUnavailable"
    assert str(exc.value).startswith(
        f"{table_uri}: the store is unavailable or throttling, tried {ATTEMPTS} times with backoff "
        "(HeadObject: HTTP 503)"
    )
    assert f"endpoint: {proxy.endpoint}" in str(exc.value)


def test_a_read_succeeds_when_the_503s_stop_within_the_budget(
    table_uri: str, s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FaultyProxy(s3_server.endpoint, fail=ATTEMPTS - 1) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        dataset = open_dataset(table_uri)
        assert proxy.failed == ATTEMPTS - 1
        proxy.reset(fail=ATTEMPTS - 1)  # and again while the rows are read
        assert read(dataset).column("x").to_pylist() == [0.0, 2.0, 1.0, 2.0]
        assert proxy.failed == ATTEMPTS - 1


def test_503_while_reading_names_the_file(
    table_uri: str, s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FaultyProxy(s3_server.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        dataset = open_dataset(table_uri)
        proxy.reset(fail=1000)
        with pytest.raises(StorageError) as exc:
            read(dataset)
    assert str(exc.value).startswith(f"{table_uri}/part-0.parquet: the store is unavailable or throttling, tried")


def test_a_store_that_never_answers_fails_after_the_timeout_and_retries(
    table_uri: str, s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FaultyProxy(s3_server.endpoint, hang=True) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        started = time.monotonic()
        with pytest.raises(StorageError) as exc:
            open_dataset(table_uri)
        elapsed = time.monotonic() - started
        assert proxy.count() == ATTEMPTS
    # 3 silent attempts of 1 s each, and the backoff between them: bounded, and far from forever.
    assert ATTEMPTS * 1.0 <= elapsed < 30
    assert str(exc.value).startswith(
        f"{table_uri}: the store did not answer within 1 s, tried {ATTEMPTS} times with backoff (HeadObject: "
    )


def test_an_endpoint_nobody_listens_on_is_unreachable(table_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the test reads: connection refused
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(StorageError) as exc:
        open_dataset(table_uri)
    assert str(exc.value).startswith(f"{table_uri}: cannot reach the store, tried {ATTEMPTS} times with backoff")
    assert f"endpoint: http://127.0.0.1:{port}" in str(exc.value)


def test_files_listed_then_deleted_are_reported_missing(tmp_path: Path, table_uri: str) -> None:
    dataset = open_dataset(table_uri)
    fs, root = filesystem(table_uri)
    fs.delete_file(f"{root}/part-1.parquet")
    with pytest.raises(StorageError) as exc:
        read(dataset)
    assert str(exc.value).startswith(f"{table_uri}/part-1.parquet: not found")
