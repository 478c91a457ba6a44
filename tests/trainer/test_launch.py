"""The pod's launcher under real torchrun: a rendezvous that never completes is told apart from the trainer's verdict.

A pod runs ``python -m tabjob_trainer.launch torchrun ARGS`` (builders.py). Here the same launcher starts the
venv's torchrun as node rank 1 of two, its rendezvous store on a loopback port nothing listens on and timeouts of a
few seconds instead of 600 s: what a pod sees through a control-plane outage longer than its timeouts.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tabjob.contracts.results import LauncherExit
from tabjob.controller.policy.pods import failure

pytestmark = pytest.mark.slow

TORCHRUN = str(Path(sys.executable).parent / "torchrun")


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(torchrun_args: list[str], message: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    return subprocess.run(
        [sys.executable, "-m", "tabjob_trainer.launch", TORCHRUN, *torchrun_args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**clean, "TABJOB_TERMINATION_LOG": str(message)},
    )


def _pod(code: int, message: str) -> dict[str, Any]:
    terminated = {"exitCode": code, "reason": "Error", "message": message, "finishedAt": "2026-01-01T00:00:00Z"}
    return {
        "metadata": {"name": "t-1", "labels": {"tabjob.dev/rank": "1"}},
        "status": {"phase": "Failed", "containerStatuses": [{"name": "trainer", "state": {"terminated": terminated}}]},
    }


def test_an_unreachable_rendezvous_is_the_launchers_retryable_exit(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    result = _launch(
        [
            "--nnodes=2",
            "--nproc-per-node=1",
            "--node-rank=1",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{_unused_port()}",
            "--rdzv-id=outage",
            "--rdzv-conf=is_host=0,read_timeout=3,join_timeout=3",
            "--max-restarts=0",
            "-m",
            "tabjob_trainer",
        ],
        message,
    )
    assert result.returncode == 1, result.stderr
    assert "Rendezvous" in result.stderr  # torchrun's own words still reach the pod's log
    verdict = LauncherExit.model_validate_json(message.read_text(), by_name=False)
    assert verdict.exit_code == 1 and verdict.log_tail and "Rendezvous" in verdict.log_tail, verdict
    f = failure(_pod(result.returncode, message.read_text()))
    assert f is not None and f.reason == "LauncherExit" and f.retryable, f


def test_a_trainer_that_started_keeps_its_own_exit(tmp_path: Path) -> None:
    """The trainer ran and failed (here: started without its inputs): the message is left to it and to the log."""
    message = tmp_path / "termination-log"
    result = _launch(["--standalone", "--nproc-per-node=1", "-m", "tabjob_trainer"], message)
    assert result.returncode == 1, result.stderr
    assert "missing --spec" in result.stderr
    assert not message.exists() or message.read_text() == ""
    f = failure(_pod(result.returncode, result.stderr[-2000:]))  # the kubelet's FallbackToLogsOnError
    assert f is not None and f.reason == "NonZeroExit" and not f.retryable, f
