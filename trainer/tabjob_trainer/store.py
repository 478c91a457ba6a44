"""The output directory's fit store: one directory per finished fit, written atomically.

A fit is written to a temporary directory and renamed into ``fits/<id>`` in one step, so a fit killed half-way
never counts as finished when a run resumes. Outcomes also travel between ranks as plain bytes (``Outcome``),
so pods need no shared volume: rank 0 writes what the others send it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from tabjob_trainer.durable import fsync_dir, write_synced
from tabjob_trainer.record import FitRecord

FITS = "fits"
RECORD = "result.json"


@dataclass
class Outcome:
    """A fit's record plus its files (arrays as .npy, the model's own files)."""

    record: FitRecord
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def done(self) -> bool:
        return self.record.succeeded


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def fit_dir(out: Path, fit_id: str) -> Path:
    return out / FITS / fit_id


def write(out: Path, outcome: Outcome) -> bool:
    """Write atomically and durably; False when this very fit (same fingerprint) is already there.

    Files, then the record, are fsynced in a temporary directory that is renamed into place and the parent
    directory fsynced: after a node crash the fit is either whole or absent, never an empty record.
    """
    final = fit_dir(out, outcome.id)
    existing = read_record(final / RECORD)
    if existing is not None and existing.succeeded and existing.fingerprint == outcome.record.fingerprint:
        return False
    tmp = out / FITS / f".tmp-{outcome.id}-{os.getpid()}-{threading.get_ident()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    for name, data in outcome.files.items():
        write_synced(tmp / name, data)
    # The record goes last: a directory without one is not a fit, whatever else it holds.
    fields = outcome.record.model_dump(by_alias=True, exclude_none=True)
    record = json.dumps(fields, indent=1, default=_json_default, allow_nan=False)
    write_synced(tmp / RECORD, record.encode())
    fsync_dir(tmp)
    if final.exists():  # an earlier failed, skipped or outdated fit: replace it
        shutil.rmtree(final)
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    fsync_dir(final.parent)
    return True


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def read_record(path: Path) -> FitRecord | None:
    """A fit record, or None when it is missing, empty or not one (a crash mid-write: the fit is not done)."""
    try:
        return FitRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None


def records(out: Path) -> dict[str, FitRecord]:
    """Every readable fit record in the store, by id (temporary directories and broken records ignored)."""
    base = out / FITS
    found: dict[str, FitRecord] = {}
    if not base.is_dir():
        return found
    for entry in sorted(base.iterdir()):
        if entry.name.startswith("."):
            continue
        record = read_record(entry / RECORD)
        if record is not None:
            found[entry.name] = record
    return found


def finished(out: Path) -> dict[str, dict[str, str] | None]:
    """Fingerprints of fits that completed, by id; failed and skipped fits are tried again on resume."""
    return {fid: rec.fingerprint for fid, rec in records(out).items() if rec.succeeded}


def read(out: Path, fit_id: str) -> Outcome:
    d = fit_dir(out, fit_id)
    files = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and p.name != RECORD}
    record = read_record(d / RECORD)
    if record is None:
        raise FileNotFoundError(f"{d / RECORD}: missing or unreadable")
    return Outcome(record, files)


def array(out: Path, fit_id: str, name: str) -> np.ndarray | None:
    path = fit_dir(out, fit_id) / f"{name}.npy"
    return np.load(path, allow_pickle=False) if path.exists() else None


def clean_temporaries(out: Path) -> None:
    base = out / FITS
    if base.is_dir():
        for entry in base.iterdir():
            if entry.name.startswith(".tmp-"):
                shutil.rmtree(entry, ignore_errors=True)
