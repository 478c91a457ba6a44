"""What a fit's result depends on, hashed, so a resumed run reuses a fit only when nothing it depends on changed.

A fit id (``GBM.t0.s0.f1``) names a place in the plan, not a result: the same id can come back with other
hyperparameters, other data, another split or a newer trainer. Each part is hashed on its own so the
leaderboard can say which one changed when a fit is trained again.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from tabjob.contracts.plan import FitPlan
from tabjob_trainer import __version__
from tabjob_trainer.dataset import Prepared

PARTS = ("hyperparameters", "data", "split", "seed", "code")
_LABELS = {
    "hyperparameters": "hyperparameters",
    "data": "data (rows, columns or labels)",
    "split": "validation split",
    "seed": "seed",
    "code": "trainer version",
}


Chunk = bytes | tuple[bytes, ...] | tuple[bytes, memoryview]  # one framed chunk, possibly in pieces


def _digest(*chunks: Chunk) -> str:
    """Each chunk framed by its length; a chunk in pieces hashes as their concatenation, never made."""
    h = hashlib.sha256()
    for chunk in chunks:
        pieces = chunk if isinstance(chunk, tuple) else (chunk,)
        h.update(sum(memoryview(p).nbytes for p in pieces).to_bytes(8, "little"))
        for piece in pieces:
            h.update(piece)
    return h.hexdigest()[:16]


def _json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()


def _array(a: np.ndarray | None) -> Chunk:
    """An array's chunk: its dtype and shape, then its own bytes (no copy of a table-sized array)."""
    if a is None:
        return b"-"
    a = np.ascontiguousarray(a)
    head = _json([str(a.dtype), list(a.shape)])
    return (head, a.data.cast("B")) if a.size else head


def data_identity(data: Prepared) -> str:
    """The training and test data as the models see them: encoded features, labels, columns, metric."""
    meta = {
        "features": data.pre.feature_names,
        "categories": data.pre.categories,
        "label": data.label.to_dict(),
        "metric": data.metric,
    }
    parts = [_json(meta), _array(data.x.numeric), _array(data.x.categorical), _array(data.y)]
    test = data.x_test
    parts += [_array(test.numeric if test else None), _array(test.categorical if test else None)]
    parts.append(_array(data.y_test))
    return _digest(*parts)


def fit_fingerprint(fit: FitPlan, folds: int, data_id: str) -> dict[str, str]:
    return {
        "hyperparameters": _digest(_json({"key": fit.key, "hp": fit.hyperparameters, "processes": fit.processes})),
        "data": data_id,
        "split": _digest(_json({"folds": folds, "bagSet": fit.bag_set, "fold": fit.fold})),
        "seed": str(fit.seed),
        "code": __version__,
    }


def changed(old: Any, new: dict[str, str]) -> list[str]:
    """The parts that differ, in words; every part when the old record has no (or a malformed) fingerprint."""
    if not isinstance(old, dict):
        return ["fingerprint (the earlier fit has none)"]
    return [_LABELS[p] for p in PARTS if old.get(p) != new[p]]


def fingerprint_of(*parts: Any) -> str:
    """A short hash of JSON-able values."""
    return _digest(*(_json(p) for p in parts))
