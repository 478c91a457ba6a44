"""Every reader of a run (`tabjob predict`, `serve`, `report`, `export`, scoring) takes a local directory or a URI.

A run in object storage is read only once committed (runs.py): its commit object lists the files that make the run,
and exactly those are fetched into a local cache (TABJOB_RUN_CACHE, default ~/.cache/tabjob/runs/<hash of the URI>),
under a temporary name that is renamed into place, so an interrupted download is never taken for a run. The cached
copy is reused while the bucket's commit object is the same, and fetched again when a later attempt recommitted it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tabjob.contracts import pod
from tabjob_trainer.errors import DataError
from tabjob_trainer.storage.filesystems import filesystem, is_object_uri, storage_error
from tabjob_trainer.storage.runs import COMMIT, cache_key, download, join

CACHE_ENV = pod.RUN_CACHE.name


def cache_root() -> Path:
    default = Path.home() / ".cache" / "tabjob" / "runs"
    return Path(os.environ.get(CACHE_ENV) or default)


def open_run(ref: str | Path) -> Path:
    """A local directory holding the run `ref` names: itself when local, else a verified copy of the bucket's."""
    text = str(ref)
    if not is_object_uri(text):
        return Path(text[len("file://") :] if text.startswith("file://") else text)
    return _fetch(text)


def _fetch(uri: str) -> Path:
    fs, base = filesystem(uri)
    try:
        with fs.open_input_stream(join(base, COMMIT)) as fh:
            commit = fh.read()
    except FileNotFoundError:
        raise DataError(_unfinished(uri)) from None
    except OSError as exc:
        text = str(exc)
        if "NoSuchKey" in text or "does not exist" in text or "Path does not exist" in text:
            raise DataError(_unfinished(uri)) from None
        raise storage_error(uri, exc) from None
    try:
        files = json.loads(commit)["files"]
        if not isinstance(files, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise DataError(f"{uri}: {COMMIT} is not a tabjob commit object (no file list)") from None
    target = cache_root() / cache_key(uri)
    if (target / COMMIT).is_file() and (target / COMMIT).read_bytes() == commit:
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        for rel in sorted(files):
            if rel.startswith("/") or ".." in rel.split("/"):
                raise DataError(f"{uri}: {COMMIT} names {rel!r}, outside the run")
            try:
                download(fs, join(base, rel), tmp / rel, join(uri, rel))
            except FileNotFoundError:
                raise DataError(f"{uri}: {COMMIT} lists {rel} but the store has no such object") from None
            except OSError as exc:
                raise storage_error(join(uri, rel), exc) from None
        (tmp / COMMIT).write_bytes(commit)
        old = target.with_name(f".{target.name}.{os.getpid()}.old")
        if target.exists():
            os.rename(target, old)
        os.rename(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _unfinished(uri: str) -> str:
    return (
        f"{uri}: not a finished run (no {COMMIT}): a run in object storage is readable once its trainer committed "
        "it; check the job's status"
    )


def run_name(ref: str | Path) -> str:
    """The last segment of a run's path or URI (s3://bucket/runs/churn/ -> churn)."""
    parts = [p for p in str(ref).split("://", 1)[-1].split("/") if p]
    return parts[-1] if parts else "run"
