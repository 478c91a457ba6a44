"""Child processes of a test session that cannot outlive it, however the session ends.

A pytest stopped by SIGTERM (a cancelled CI job, a `timeout` wrapper, a person's `kill`) dies at once: Python's
default for SIGTERM runs no `finally` and no fixture teardown. An operator it had started would go on reconciling
the test cluster, racing the next session's operator for the same jobs. The kernel closes that gap: with
PR_SET_PDEATHSIG the child gets SIGTERM (the operator's orderly stop) the moment the thread that started it dies,
whatever killed it, SIGKILL included. Fixtures start their children from pytest's main thread, so that thread's
death is the session's. Linux only, like the test bed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# Loaded before any fork: the child between fork and exec should do as little as it can.
_LIBC = ctypes.CDLL(None, use_errno=True)


def spawn(argv: list[str], *, log: Path, env: Mapping[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """Start `argv` with its output appended to `log`; it gets SIGTERM when this process dies."""
    parent = os.getpid()

    def die_with_parent() -> None:
        if _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")
        if os.getppid() != parent:  # the parent died before the request was in place: nothing would tell us
            os.kill(os.getpid(), signal.SIGTERM)

    with open(log, "ab") as out:
        return subprocess.Popen(
            argv,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            preexec_fn=die_with_parent,
        )
