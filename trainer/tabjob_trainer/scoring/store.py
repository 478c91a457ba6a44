"""The scoring output: a prefix (or local directory) of Parquet part files, the plan and the success marker.

    <output>/part-00000.parquet ... part-<n-1>.parquet    one per shard, written whole
    <output>/_tabjob_scoring.json                          the plan: which pieces make which shard, whose it is
    <output>/_SUCCESS                                      every part is there: their names and row counts

**The commit protocol.** S3 and GCS have no rename, so a part is written under its final key in one request: the
object appears when that request completes (a single PUT, or a multipart upload, whose completion is atomic too)
and never half-written. "Shard k is done" is exactly "part-k exists": a retried or preempted pod lists the prefix
once and skips those shards. On local disk a part goes to a temporary name in the same directory and is renamed into
place. The success marker is written last, by any pod that lists every part present after committing its own
(the last pod to finish always does, since each pod commits before it lists); its content is deterministic, so two
pods writing it at once write the same bytes. Readers skip names starting with `_`, as Spark's and tabjob's do.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from typing import Any

import pyarrow.fs as pafs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tabjob_trainer.scoring.shards import Shard
from tabjob_trainer.storage.filesystems import StorageError, filesystem, identity, is_object_uri

PLAN = "_tabjob_scoring.json"
SUCCESS = "_SUCCESS"
PART = re.compile(r"^part-(\d{5,})\.parquet$")


def part_name(shard: int) -> str:
    return f"part-{shard:05d}.parquet"


class ScoringPlan(BaseModel):
    """Written by pod 0 after its preflight; every pod scores from it, so all pods agree on the shards."""

    model_config = ConfigDict(extra="forbid")

    owner: str = Field(min_length=1)  # the TabularPrediction's uid (`tabjob score`: one id per invocation)
    fingerprint: str  # model commit, data files, shards, columns: a plan with the same one resumes
    model: str
    model_name: str
    data: str
    files: list[str]  # the data files, in order, as the pieces' `file` indexes count them
    rows: int | None  # None for CSV
    passthrough: list[str]
    columns: list[str]  # the part files' columns: passthrough, prediction, proba_<class>...
    parallelism: int = Field(ge=1)
    shards: list[Shard]


class SuccessMarker(BaseModel):
    model_config = ConfigDict(extra="forbid")

    owner: str
    fingerprint: str
    rows: int
    parts: dict[str, int]  # part name -> rows


class OutputStore:
    """The output prefix through `filesystem(uri)`; every failure is a StorageError with reason OutputUnavailable."""

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/") + "/"
        self.fs, base = filesystem(uri)
        self.base = base.rstrip("/")
        self.remote = is_object_uri(uri)

    def _path(self, name: str) -> str:
        return f"{self.base}/{name}"

    def _failed(self, action: str, exc: BaseException) -> StorageError:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StorageError(f"{self.uri}: cannot {action} as {identity()}: {first}", reason="OutputUnavailable")

    def names(self) -> dict[str, int]:
        """The files directly under the prefix, with their sizes."""
        selector = pafs.FileSelector(self.base, recursive=False, allow_not_found=True)
        try:
            infos = self.fs.get_file_info(selector)
        except OSError as exc:
            raise self._failed("list it", exc) from None
        return {i.base_name: int(i.size or 0) for i in infos if i.type == pafs.FileType.File}

    def parts(self) -> set[int]:
        """The shards whose part is committed."""
        return {int(m.group(1)) for name in self.names() if (m := PART.match(name))}

    def read(self, name: str) -> bytes | None:
        try:
            with self.fs.open_input_stream(self._path(name)) as fh:
                return bytes(fh.read())
        except FileNotFoundError:
            return None
        except OSError as exc:
            text = str(exc)
            if "NoSuchKey" in text or "does not exist" in text or "not found" in text.lower():
                return None
            raise self._failed(f"read {name}", exc) from None

    def write(self, name: str, data: bytes) -> None:
        """`name` appears whole or not at all (module docstring)."""
        try:
            if self.remote:
                with self.fs.open_output_stream(self._path(name)) as out:
                    out.write(data)
                return
            self.fs.create_dir(self.base, recursive=True)
            tmp = self._path(f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
            with self.fs.open_output_stream(tmp) as out:
                out.write(data)
            self.fs.move(tmp, self._path(name))
        except OSError as exc:
            raise self._failed(f"write {name}", exc) from None

    def part_rows(self, name: str) -> int:
        """A committed part's row count, from its footer alone."""
        import pyarrow.parquet as pq

        try:
            with self.fs.open_input_file(self._path(name)) as fh:
                return int(pq.ParquetFile(fh).metadata.num_rows)
        except OSError as exc:
            raise self._failed(f"read {name}", exc) from None

    def delete(self, name: str) -> None:
        try:
            self.fs.delete_file(self._path(name))
        except FileNotFoundError:
            return
        except OSError as exc:
            if "NoSuchKey" in str(exc) or "does not exist" in str(exc):
                return
            raise self._failed(f"delete {name}", exc) from None

    def read_model(self, name: str, model: type[Any]) -> Any | None:
        """A JSON object of ours, or None when absent or not one (a foreign file under our name)."""
        raw = self.read(name)
        if raw is None:
            return None
        with contextlib.suppress(ValidationError, ValueError):
            return model.model_validate_json(raw)
        return None

    def clear(self) -> int:
        """Remove an earlier result (overwrite): the marker first, so it reads unfinished, then parts, then the plan.
        Other files under the prefix are not ours and are left alone. Returns the number of files removed."""
        names = self.names()
        ours = [n for n in names if PART.match(n)]
        removed = 0
        for name in [SUCCESS, *sorted(ours), PLAN]:
            if name in names:
                self.delete(name)
                removed += 1
        return removed


def marker_bytes(marker: SuccessMarker) -> bytes:
    return (json.dumps(marker.model_dump(), sort_keys=True, indent=1) + "\n").encode()
