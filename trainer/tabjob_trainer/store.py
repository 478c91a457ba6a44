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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FITS = "fits"
RECORD = "result.json"


@dataclass
class Outcome:
    """A fit's record (JSON-able) plus its files (arrays as .npy, the model's own files)."""

    record: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def done(self) -> bool:
        return self.record.get("status") == "done"


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def fit_dir(out: Path, fit_id: str) -> Path:
    return out / FITS / fit_id


def write(out: Path, outcome: Outcome) -> bool:
    """Write atomically; False when a finished copy is already there (another rank or an earlier run)."""
    final = fit_dir(out, outcome.id)
    if (final / RECORD).exists():
        return False
    tmp = out / FITS / f".tmp-{outcome.id}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    for name, data in outcome.files.items():
        (tmp / name).write_bytes(data)
    # The record goes last: a directory without one is not a fit, whatever else it holds.
    (tmp / RECORD).write_text(json.dumps(outcome.record, indent=1, default=_json_default))
    if final.exists():  # an earlier failed or skipped attempt: replace it
        shutil.rmtree(final)
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    return True


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def records(out: Path) -> dict[str, dict[str, Any]]:
    """Every fit record in the store, by id (temporary directories ignored)."""
    base = out / FITS
    found: dict[str, dict[str, Any]] = {}
    if not base.is_dir():
        return found
    for entry in sorted(base.iterdir()):
        if entry.name.startswith(".") or not (entry / RECORD).is_file():
            continue
        found[entry.name] = json.loads((entry / RECORD).read_text())
    return found


def finished(out: Path) -> set[str]:
    """Ids of fits that completed; failed and skipped fits are tried again on resume."""
    return {fid for fid, rec in records(out).items() if rec.get("status") == "done"}


def read(out: Path, fit_id: str) -> Outcome:
    d = fit_dir(out, fit_id)
    files = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and p.name != RECORD}
    return Outcome(json.loads((d / RECORD).read_text()), files)


def array(out: Path, fit_id: str, name: str) -> np.ndarray | None:
    path = fit_dir(out, fit_id) / f"{name}.npy"
    return np.load(path, allow_pickle=False) if path.exists() else None


def clean_temporaries(out: Path) -> None:
    base = out / FITS
    if base.is_dir():
        for entry in base.iterdir():
            if entry.name.startswith(".tmp-"):
                shutil.rmtree(entry, ignore_errors=True)
