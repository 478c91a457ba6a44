"""``python -m tabjob_trainer.launch torchrun ARGS...``: a trainer pod's command, which tells torchrun's own failure
apart from the trainer's verdict.

torchrun exits 1 both when the trainer has spoken (no model finished, bad data) and when torchrun gave up before
starting any trainer process: its rendezvous with the other pods never completed (the store's DNS name unresolvable
through a control-plane outage longer than its 600 s timeouts, a peer pod that never came). Only the trainer
writes a RunSummary, so the operator saw exit 1 without one either way and took both for the trainer's final word.
Here torchrun runs as a child: every trainer process marks that it started (the file named by
TABJOB_TRAINER_STARTED), and when torchrun exits non-zero with no mark, the termination message is a LauncherExit
carrying torchrun's last lines of stderr, which the operator retries like any other failure of the infrastructure.

As the container's PID 1 the launcher forwards SIGTERM and SIGINT to torchrun (PID 1 gets no default handling),
passes torchrun's stderr through unchanged, and exits with torchrun's exit code. It imports neither torch nor
pandas: the pod's start is not delayed by it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import IO

from tabjob.contracts import pod
from tabjob.contracts.results import LauncherExit
from tabjob_trainer.termination import write_message

STARTED_ENV = pod.TRAINER_STARTED.name
TAIL_LINES = 8
EXIT_CANNOT_START = 127  # the shell's "command not found": the image lacks torchrun, which no retry fixes


def mark_started() -> None:
    """Every trainer process calls this first: from here on, an exit is the trainer's."""
    path = os.environ.get(STARTED_ENV)
    if path:
        with contextlib.suppress(OSError):
            Path(path).touch()


def exit_code(returncode: int) -> int:
    """A child's exit status as a shell (and the kubelet) reports it: 128 + N for death by signal N."""
    return returncode if returncode >= 0 else 128 - returncode


def verdict(code: int, trainer_started: bool, tail: Iterable[str]) -> LauncherExit | None:
    """The launcher's termination message, or None when it must leave the message to the trainer (or the log)."""
    if code == 0 or trainer_started:
        return None
    text = "\n".join(line.rstrip() for line in tail).strip()
    return LauncherExit(exit_code=code, log_tail=text or None)


def relay(source: IO[bytes], sink: IO[bytes], lines: int = TAIL_LINES) -> list[str]:
    """Copy `source` to `sink` line by line as it comes; the last `lines` lines, decoded."""
    tail: deque[str] = deque(maxlen=lines)
    for line in iter(source.readline, b""):
        with contextlib.suppress(OSError):  # a closed log must not stop the child
            sink.write(line)
            sink.flush()
        tail.append(line.decode(errors="replace"))
    return list(tail)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tabjob_trainer.launch torchrun [ARGS...]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tabjob-launch-") as scratch:
        marker = Path(scratch) / "started"
        try:
            proc = subprocess.Popen(argv, env={**os.environ, STARTED_ENV: str(marker)}, stderr=subprocess.PIPE)
        except OSError as exc:
            print(f"tabjob_trainer.launch: cannot start {argv[0]}: {exc}", file=sys.stderr)
            return EXIT_CANNOT_START

        def forward(signum: int, _frame: FrameType | None) -> None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, forward)
        assert proc.stderr is not None
        tail = relay(proc.stderr, sys.stderr.buffer)
        code = exit_code(proc.wait())
        message = verdict(code, marker.exists(), tail)
    if message is not None:
        write_message(message.for_termination())
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
