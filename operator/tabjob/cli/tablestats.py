"""The training table's metadata for ``tabjob validate`` and ``tabjob plan``, when this machine can read them.

The planner checks each pod's memory against the table (planner/memory.py) only when it is given the table's
footers. They are read here, in a child process running the trainer's reader (the control side never imports
pyarrow), and only where that is quick and safe: a local file, or a bucket this shell has credentials for. A path
inside the job's data volume is not on this machine; the trainer then checks the same on rank 0 before it reads a
row.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from tabjob.contracts import pod
from tabjob.families import BUILTIN_SCHEME
from tabjob.planner import DataStats

TIMEOUT_SECONDS = 120


def _credentials(scheme: str) -> bool:
    env = os.environ
    if scheme == "s3":
        keys = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI")
        return any(env.get(k) for k in keys) or (Path.home() / ".aws" / "credentials").exists()
    if scheme == "gs":
        return bool(env.get("GOOGLE_APPLICATION_CREDENTIALS"))
    return True


def unreadable(uri: str) -> str:
    """Why this machine does not read the table's metadata, or "" when it may try."""
    if uri.startswith(BUILTIN_SCHEME):
        return "a built-in dataset"
    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    if scheme in ("", "file"):
        path = uri.removeprefix("file://")
        if not Path(path).exists():
            return f"{uri} is not on this machine (a path in the job's data volume?)"
    elif not _credentials(scheme):
        return f"no {scheme} credentials in this shell"
    if importlib.util.find_spec("tabjob_trainer") is None:
        return "the trainer is not installed here (pip install tabjob[trainer])"
    return ""


def table_stats(uri: str) -> tuple[DataStats | None, str]:
    """(the table's metadata, "") or (None, why the memory was not checked)."""
    why = unreadable(uri)
    if why:
        return None, why
    env = {**os.environ, pod.STORAGE_RETRIES.name: "1"}  # a store that fails is a note here, not a minute of retries
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tabjob_trainer.datastats", uri],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return None, f"reading {uri}'s metadata took over {TIMEOUT_SECONDS} s"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return None, lines[-1] if lines else f"reading {uri}'s metadata failed (exit code {proc.returncode})"
    fields = json.loads(proc.stdout)
    fields["pieces"] = tuple(fields["pieces"])
    return DataStats(**fields), ""
