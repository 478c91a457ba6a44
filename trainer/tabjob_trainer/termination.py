"""The container's termination message: where it is, and writing it so that a finished job never fails on it.

Kept apart from ``job`` so that the pod's launcher (``launch``), which runs before torch or pandas is needed,
writes it the same way without importing the trainer.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tabjob.contracts import pod
from tabjob_trainer.durable import write_synced


def termination_path() -> Path | None:
    explicit = pod.TERMINATION.get()
    if explicit:
        return Path(explicit)
    default = Path(pod.TERMINATION_LOG)  # exists only inside a Kubernetes container
    return default if default.exists() and os.access(default, os.W_OK) else None


def write_message(text: str) -> None:
    path = termination_path()
    if path is None:
        return
    with contextlib.suppress(OSError):  # a read-only path must not fail a finished job
        # Written in place: the kubelet mounts this one file, so it cannot be replaced by a rename.
        write_synced(path, text.encode())
