"""Writes that survive a node crash: temporary file, fsync, rename over the target, fsync of the directory.

Without the fsyncs a crash can leave a renamed but empty file (the data never reached the disk), which every
later attempt would then read as a finished result.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes) -> None:
    """Write and fsync in place (for files that must not be replaced, such as /dev/termination-log)."""
    with path.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_write(path: Path, data: bytes) -> None:
    """Readers see the old content or the new, never a part, and the new content is on disk when this returns."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write_synced(tmp, data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def write_json(path: Path, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=2, default=str, allow_nan=False).encode())


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A JSON object from a file, or None when the file is missing, empty, cut short or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
