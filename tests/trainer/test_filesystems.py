"""storage/filesystems.py without a server: how a store's failure (as pyarrow words it) becomes one line, and what
filesystem() decides from the environment."""

from __future__ import annotations

import os

import pytest

from tabjob_trainer.storage.filesystems import CHECKSUM_ENV, StorageError, filesystem, storage_error, store_failure

URI = "s3://bucket/t/part-0.parquet"
SECRET = "s3cr3t-never-shown-0123456789"


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEY123456")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://rgw.example.internal:7480")
    monkeypatch.setenv("TABJOB_STORAGE_RETRIES", "4")
    monkeypatch.delenv("AWS_ROLE_ARN", raising=False)


def _aws(what: str, op: str = "HeadObject", message: str = "No response body.") -> OSError:
    where = "When reading information for key 't/part-0.parquet' in bucket 'bucket'"
    return OSError(f"{where}: AWS Error {what} during {op} operation: {message}")


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            _aws("ACCESS_DENIED"),
            f"{URI}: access denied (HeadObject: ACCESS_DENIED); identity: access key AKIA...3456 (AWS_ACCESS_KEY_ID); "
            "endpoint: https://rgw.example.internal:7480; check the credentials and what they may read",
        ),
        (
            _aws("NO_SUCH_BUCKET", "ListObjectsV2", "The specified bucket does not exist (Request ID: 18EB)"),
            f"{URI}: bucket bucket does not exist; identity: access key AKIA...3456 (AWS_ACCESS_KEY_ID); "
            "endpoint: https://rgw.example.internal:7480",
        ),
        (
            _aws("UNKNOWN (HTTP status 503)"),
            f"{URI}: the store is unavailable or throttling, tried 4 times with backoff (HeadObject: HTTP 503); "
            "identity: access key AKIA...3456 (AWS_ACCESS_KEY_ID); endpoint: https://rgw.example.internal:7480",
        ),
        (
            _aws("NETWORK_CONNECTION", message="curlCode: 28, Timeout was reached; Details: Operation too slow."),
            f"{URI}: the store did not answer within 10 s, tried 4 times with backoff (HeadObject: NETWORK_CONNECTION, "
            "curlCode: 28, Timeout was reached; Details: Operation too slow); identity: access key AKIA...3456 "
            "(AWS_ACCESS_KEY_ID); endpoint: https://rgw.example.internal:7480",
        ),
        (
            _aws("NETWORK_CONNECTION", message="curlCode: 7, Could not connect to server"),
            f"{URI}: cannot reach the store, tried 4 times with backoff (HeadObject: NETWORK_CONNECTION, curlCode: 7, "
            "Could not connect to server); identity: access key AKIA...3456 (AWS_ACCESS_KEY_ID); "
            "endpoint: https://rgw.example.internal:7480",
        ),
    ],
    ids=["denied", "no-bucket", "503", "timeout", "unreachable"],
)
def test_a_store_failure_is_one_line_naming_uri_identity_and_attempts(exc: OSError, expected: str) -> None:
    assert store_failure(exc)
    error = storage_error(URI, exc)
    assert isinstance(error, StorageError) and error.reason == "DataUnavailable"
    assert str(error) == expected
    assert SECRET not in str(error)


def test_bad_bytes_are_not_a_store_failure() -> None:
    assert not store_failure(OSError("Couldn't deserialize thrift: TProtocolException: Invalid data"))
    assert not store_failure(ValueError("Parquet magic bytes not found in footer"))


def test_local_failures_name_the_path_without_an_identity() -> None:
    assert str(storage_error("/data/t.csv", FileNotFoundError(2, "No such file"))) == "/data/t.csv: file not found"
    denied = storage_error("/data/t.csv", PermissionError(13, "Permission denied"))
    assert str(denied).startswith("/data/t.csv: permission denied") and "identity" not in str(denied)


def test_s3_response_checksums_are_off_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHECKSUM_ENV, raising=False)
    filesystem("s3://bucket/key")
    assert os.environ[CHECKSUM_ENV] == "when_required"
    monkeypatch.setenv(CHECKSUM_ENV, "when_supported")
    filesystem("s3://bucket/key")
    assert os.environ[CHECKSUM_ENV] == "when_supported"
