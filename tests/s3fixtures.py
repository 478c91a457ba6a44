"""A real S3 server (SeaweedFS, hack/s3/seaweed.py) for the tests that read or write object storage.

One server per pytest process, started on first use (about 1.5 s); each test gets a bucket of its own and the
standard AWS variables pointing at the server, so the code under test finds it exactly as it would on a cluster.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.s3.seaweed import SeaweedS3

_buckets = itertools.count()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    server = SeaweedS3.start(Path(tmp_path_factory.mktemp("seaweedfs")))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket's name, with AWS_ENDPOINT_URL and the keys set for this test (and its subprocesses)."""
    name = f"test-{os.getpid()}-{next(_buckets)}"
    s3_server.make_bucket(name)
    for key, value in s3_server.client_env().items():
        monkeypatch.setenv(key, value)
    return name
