"""`tabjob logs` on a job whose pod is not there: one line saying why, never a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import pytest

import tabjob.client
from tabjob.cli import logs


class _Client:
    def __init__(self, status: dict[str, Any] | None) -> None:
        self.status = status

    def logs(self, name: str, rank: int, follow: bool = False, tail: int | None = None) -> Iterator[str]:
        raise LookupError(f"{name} has no pod of node rank {rank}")
        yield ""  # a generator, as the real one

    def get(self, name: str) -> dict[str, Any]:
        if self.status is None:
            raise LookupError(f"no TabularJob {name}")
        return {"status": self.status}


@pytest.mark.parametrize(
    ("status", "says"),
    [
        ({"phase": "Failed", "message": "s3://b/train/: access denied"}, "denied is Failed and the pod has no log"),
        ({"phase": "Pending"}, "denied has no pod of node rank 0: denied is Pending"),
        (None, "denied has no pod of node rank 0"),
    ],
)
def test_a_missing_pod_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], status: dict[str, Any] | None, says: str
) -> None:
    monkeypatch.setattr(tabjob.client, "Client", lambda namespace=None: _Client(status))
    rc = logs.run(argparse.Namespace(name="denied", namespace=None, rank=0, follow=False, tail=None))
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("error: ") and says in err and "Traceback" not in err
    if status and status.get("message"):
        assert status["message"] in err
