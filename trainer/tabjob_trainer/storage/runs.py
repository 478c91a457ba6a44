"""A run in object storage (`spec.output.uri`): written as it goes, committed last, resumed and read from there.

The trainer always writes its run to a local directory first (the pod's /output, an emptyDir without a volume):
fits are fsynced and renamed into place there (store.py, durable.py). `RunMirror` copies that directory into the
bucket behind it, because S3 and GCS have no rename, and a reader must never take a half-copied run for a whole one:

- A fit is copied as soon as rank 0 has it: its files first, its record (`fits/<id>/result.json`) last, so a fit in
  the bucket is finished exactly when its record is there. A fit that is replaced (another fingerprint) loses its
  old record first.
- When the job starts, the commit object `_COMMITTED.json` and `leaderboard.json` of any earlier attempt are deleted
  before anything new is written: from then on the run reads as unfinished until this attempt commits.
- When the run ends, every file not copied yet goes up (models, leaderboard, reports, the MLServer export), and then
  the commit object: the list of the run's files with their sizes. That single PUT is the commit. A reader checks it
  and fetches exactly the files it lists; a run without one is refused as unfinished.
- A resumed attempt (pod lost, preempted, suspended) first downloads the finished fits' records and files, and
  `run.json` (the time limit's clock), so fingerprints match and the finished fits are reused as from a volume.

Copies of fits run on a background thread so fitting never waits on the network; a copy that fails after the
store's own bounded retries fails the run with reason OutputUnavailable (retried as a new attempt, which resumes).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.fs as pafs

from tabjob_trainer.storage.filesystems import (
    StorageError,
    filesystem,
    is_object_uri,
    refused,
    storage_error,
)

COMMIT = "_COMMITTED.json"
RECORD = "result.json"  # store.RECORD: a fit directory's record, written (and copied) last
FITS = "fits"
RUN_STATE = "run.json"  # job.RUN_FILE: the time limit's clock, kept across attempts
# Written by the trainer before the results: stale once a new attempt starts, so deleted with the commit.
UNFINISHED_MARKS = (COMMIT, "leaderboard.json")
_CHUNK = 8 << 20


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts if p)])


def _unavailable(uri: str, action: str, exc: BaseException) -> StorageError:
    """The run's store failing, as the job's reason: OutputRefused (denied, no such bucket: another attempt would be
    refused too) or OutputUnavailable (down, busy, slow: a new attempt resumes from what the bucket holds)."""
    said = storage_error(uri, exc)
    return StorageError(f"cannot {action}: {said}", reason="OutputRefused" if refused(exc) else "OutputUnavailable")


@dataclass
class RunMirror:
    """The bucket copy of one local run directory."""

    uri: str
    local: Path
    fs: pafs.FileSystem = field(init=False)
    base: str = field(init=False)
    _copied: dict[str, tuple[int, int]] = field(default_factory=dict, init=False)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue, init=False)
    _worker: threading.Thread | None = field(default=None, init=False)
    _error: StorageError | None = field(default=None, init=False)
    bytes_copied: int = field(default=0, init=False)
    seconds_copying: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if not is_object_uri(self.uri):
            raise StorageError(f"{self.uri}: spec.output.uri must be an s3:// or gs:// URI", "OutputRefused")
        self.fs, self.base = filesystem(self.uri)

    # ------------------------------------------------------------------ start of an attempt

    def restore(self) -> int:
        """Download the finished fits (record last) and run.json; returns how many fits were restored.

        A fit this directory already holds (a local resume) is kept, and counted as copied when its record is the
        bucket's, so that it is not uploaded again."""
        restored = 0
        for fit_id, files in self._remote_fits().items():
            if RECORD not in files:
                continue  # a fit whose copy was cut short: not finished
            rel = f"{FITS}/{fit_id}"
            target = self.local / FITS / fit_id
            if (target / RECORD).exists():
                tmp_record = self.local / FITS / f".tmp-record-{fit_id}"
                self._download(f"{rel}/{RECORD}", tmp_record)
                if tmp_record.read_bytes() == (target / RECORD).read_bytes():
                    for name in files:
                        if (target / name).exists():
                            self._remember(f"{rel}/{name}")
                tmp_record.unlink()
                continue
            tmp = self.local / FITS / f".tmp-restore-{fit_id}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for name in sorted(files, key=lambda n: n == RECORD):
                self._download(f"{rel}/{name}", tmp / name)
            shutil.rmtree(target, ignore_errors=True)  # a directory without a record is not a fit
            os.rename(tmp, target)
            for name in files:
                self._remember(f"{rel}/{name}")
            restored += 1
        if self._try_download(RUN_STATE, self.local / RUN_STATE):
            self._remember(RUN_STATE)
        return restored

    def begin(self) -> None:
        """This attempt's results are not written yet: take down the commit (and the leaderboard) of an earlier one."""
        for name in UNFINISHED_MARKS:
            self._delete(name)

    # ------------------------------------------------------------------ while it runs

    def sync(self) -> None:
        """Copy every fit finished locally since the last sync, in the background (each: files, then the record)."""
        self._raise_if_failed()
        if self._worker is None:
            self._worker = threading.Thread(target=self._drain, name="run-mirror", daemon=True)
            self._worker.start()
        self._queue.put("sync")

    def _drain(self) -> None:
        while True:
            token = self._queue.get()
            try:
                if token is None:
                    return
                if self._error is None:
                    if (self.local / RUN_STATE).exists() and self._changed(RUN_STATE):
                        self._upload(RUN_STATE)  # the time limit's clock, for the next attempt
                    for record in sorted((self.local / FITS).glob(f"*/{RECORD}")):
                        if not record.parent.name.startswith("."):
                            self._copy_fit(record.parent.name)
            except StorageError as exc:
                self._error = exc
            finally:
                self._queue.task_done()

    def _copy_fit(self, fit_id: str) -> None:
        directory = self.local / FITS / fit_id
        if not (directory / RECORD).exists():
            return
        rel = f"{FITS}/{fit_id}"
        if f"{rel}/{RECORD}" in self._copied and not self._changed(f"{rel}/{RECORD}"):
            return
        # A replaced fit: its old record goes first, so the bucket never pairs it with the new files.
        self._delete(f"{rel}/{RECORD}")
        names = sorted(p.name for p in directory.iterdir() if p.is_file())
        for name in sorted(names, key=lambda n: n == RECORD):
            self._upload(f"{rel}/{name}")

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    # ------------------------------------------------------------------ end of the run

    def commit(self) -> dict[str, int]:
        """Copy what is left, then write the commit object; returns the committed files and their sizes."""
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join()
            self._worker = None
        self._raise_if_failed()
        files = {rel: size for rel, size in local_files(self.local).items() if not _scratch(rel)}
        for rel in sorted(files):
            if self._changed(rel):
                self._upload(rel)
        manifest = {"files": files, "committedAt": time.time(), "source": str(self.local)}
        self._put_bytes(COMMIT, json.dumps(manifest, indent=1, sort_keys=True).encode())
        return files

    # ------------------------------------------------------------------ the store

    def _remote_fits(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        prefix = join(self.base, FITS)
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
        except OSError as exc:
            raise _unavailable(join(self.uri, FITS), "list the finished fits", exc) from None
        for info in infos:
            if info.type != pafs.FileType.File:
                continue
            rel = info.path[len(prefix) + 1 :].split("/")
            if len(rel) == 2 and not rel[0].startswith("."):
                found.setdefault(rel[0], set()).add(rel[1])
        return found

    def _changed(self, rel: str) -> bool:
        try:
            st = (self.local / rel).stat()
        except FileNotFoundError:
            return False
        return self._copied.get(rel) != (st.st_size, st.st_mtime_ns)

    def _remember(self, rel: str) -> None:
        st = (self.local / rel).stat()
        self._copied[rel] = (st.st_size, st.st_mtime_ns)

    def _upload(self, rel: str) -> None:
        started = time.perf_counter()
        path = self.local / rel
        try:
            with path.open("rb") as src, self.fs.open_output_stream(join(self.base, rel)) as dst:
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
                    self.bytes_copied += len(chunk)
        except FileNotFoundError:
            return  # replaced locally meanwhile (an atomic rename): the next copy takes the new one
        except OSError as exc:
            raise _unavailable(join(self.uri, rel), "write", exc) from None
        self.seconds_copying += time.perf_counter() - started
        self._remember(rel)

    def _put_bytes(self, rel: str, data: bytes) -> None:
        try:
            with self.fs.open_output_stream(join(self.base, rel)) as dst:
                dst.write(data)
        except OSError as exc:
            raise _unavailable(join(self.uri, rel), "write", exc) from None

    def _delete(self, rel: str) -> None:
        try:
            self.fs.delete_file(join(self.base, rel))
        except FileNotFoundError:
            pass
        except OSError as exc:
            if _missing(exc) or "not found" in str(exc).lower():
                return
            raise _unavailable(join(self.uri, rel), "delete", exc) from None

    def _download(self, rel: str, target: Path) -> None:
        try:
            download(self.fs, join(self.base, rel), target, join(self.uri, rel))
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _unavailable(join(self.uri, rel), "read the run's earlier attempt", exc) from None

    def _try_download(self, rel: str, target: Path) -> bool:
        try:
            self._download(rel, target)
        except FileNotFoundError:
            return False
        return True


def download(fs: pafs.FileSystem, path: str, target: Path, uri: str) -> None:
    """One object to a local file, atomically (a temporary name renamed into place). A missing object is a
    FileNotFoundError; any other failure of the store is left to the caller to word (input or output side)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.part")
    try:
        with fs.open_input_stream(path) as src, tmp.open("wb") as dst:
            while chunk := src.read(_CHUNK):
                dst.write(chunk)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, FileNotFoundError) or _missing(exc):
            raise FileNotFoundError(uri) from None
        raise
    os.replace(tmp, target)


def _missing(exc: BaseException) -> bool:
    text = str(exc)
    return "NoSuchKey" in text or "does not exist" in text or "Path does not exist" in text


def local_files(root: Path) -> dict[str, int]:
    """Every regular file under root, by path relative to it, with its size."""
    out: dict[str, int] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            out[rel] = path.stat().st_size
    return out


def _scratch(rel: str) -> bool:
    """Files of this attempt's own that a reader of the run must not take: temporaries, logs of one pod."""
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(".") or name == COMMIT


def cache_key(uri: str) -> str:
    return hashlib.sha256(uri.rstrip("/").encode()).hexdigest()[:16]
