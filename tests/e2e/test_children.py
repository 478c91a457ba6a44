"""The operator the e2e fixture starts ends with the pytest that started it, even when pytest is killed by SIGTERM.

No cluster needed: a pytest in a child process runs a fixture that starts a real process through the same `spawn`
as the `Operator` fixture, and is then terminated the way a cancelled CI job terminates it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

INNER = """
import os
import time
from pathlib import Path

import pytest

from tests.e2e.children import spawn


@pytest.fixture
def operator(tmp_path):
    proc = spawn(["sleep", "600"], log=tmp_path / "child.log", env=os.environ, cwd=tmp_path)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait()


def test_runs_until_terminated(operator):
    Path(os.environ["CHILD_PID_FILE"]).write_text(str(operator.pid))
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Running or stopped; a zombie (exited, not yet reaped by whoever adopted it) has stopped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout:g}s")


def test_the_fixtures_child_ends_when_pytest_gets_sigterm(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    pid_file = tmp_path / "child.pid"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CHILD_PID_FILE": str(pid_file)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts="]
    session = subprocess.Popen(
        [*argv, str(tmp_path / "test_inner.py")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait("the inner test started its child", pid_file.exists, timeout=120)
        child = int(pid_file.read_text())
        assert _alive(child)
        session.send_signal(signal.SIGTERM)
        session.wait(timeout=30)
        assert session.returncode == -signal.SIGTERM, session.stdout.read() if session.stdout else ""
        _wait(f"the child {child} ended", lambda: not _alive(child), timeout=10)
    finally:
        if session.poll() is None:
            session.kill()
            session.wait()
        if pid_file.exists() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)  # what the fix should have done: no leftovers
