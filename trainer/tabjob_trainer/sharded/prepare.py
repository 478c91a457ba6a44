"""``prepare_sharded``: the sharded twin of ``dataset.prepare``, every rank with its own rows (sharded/load.py)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from tabjob_trainer.dataset import Prepared
from tabjob_trainer.errors import DataError
from tabjob_trainer.metrics import resolve_metric
from tabjob_trainer.sharded import summaries
from tabjob_trainer.sharded.info import ShardInfo
from tabjob_trainer.sharded.load import (
    Exchange,
    Layout,
    Part,
    agreed,
    candidates_of,
    encode_part,
    finish_numeric,
    layout_of,
    mine,
    offsets,
    preprocessor,
    summary_of,
    survey,
)
from tabjob_trainer.storage.datasets import open_dataset
from tabjob_trainer.storage.structure import Dataset


class Group(Exchange, Protocol):
    def gather(self, value: Any) -> list[Any] | None:
        """Every rank's value on rank 0 (None elsewhere)."""
        ...


def prepare_sharded(
    dataset: Dataset,
    label: str,
    problem_type: str,
    eval_metric: str,
    test: str | None,
    comm: Group,
    whole: bool = False,
) -> Prepared:
    """This rank's share of the training table (and of the test table), encoded as every rank agreed. ``whole``
    (alone, every piece): the whole table as ``dataset.prepare`` gives it, read column by column without pandas."""
    train = dataset.uri
    pieces = mine(dataset, comm)
    candidates = candidates_of(dataset, label)
    found = agreed(comm, lambda: survey(dataset, pieces, label, candidates, train))
    parts = comm.all_gather(summary_of(found))
    info = summaries.label_info(summaries.merge_labels([p.label for p in parts]), problem_type, train, label)
    try:
        metric = resolve_metric(eval_metric, info.problem_type)
    except ValueError as exc:
        raise DataError(f"{train}: column {label!r}: {exc}") from None
    layout = layout_of(dataset, label, parts)
    part = agreed(comm, lambda: encode_part(dataset, pieces, found, layout, info, train))
    rows, total = offsets(comm, pieces, found, dataset.pieces())
    present = np.sum(comm.all_gather(part.present), axis=0)
    layout, x = finish_numeric(layout, part.x, present)
    pre = preprocessor(layout)
    shard = ShardInfo(comm.rank, comm.world, part.keys, rows, total, [(p.file, p.row_group) for p in pieces])
    out = Prepared(x, part.y, info, pre, metric, shard=shard)
    del part, x
    if test:
        _add_test(out, test, layout, comm)
    if whole:
        return replace(out, shard=None)
    shard.y_all = _on_zero(comm, rows, out.y, total)
    if out.shard is not None and out.shard.test_rows is not None and out.y_test is not None:
        shard.y_test_all = _on_zero(comm, out.shard.test_rows, out.y_test, out.shard.total_test_rows)
    shard.identity = _identity(comm, out)
    return out


def _add_test(out: Prepared, test: str, layout: Layout, comm: Group) -> None:
    dataset = agreed(comm, lambda: open_dataset(test))
    if layout.label not in dataset.schema.names:
        raise DataError(f"{test}: label column {layout.label!r} not found in the test data")
    missing = [c for c in layout.features if c not in dataset.schema.names]
    if missing:
        raise DataError(f"{test}: column {missing[0]!r} used in training is missing")
    pieces = mine(dataset, comm)
    found = agreed(comm, lambda: survey(dataset, pieces, layout.label, [], test))
    part: Part = agreed(comm, lambda: encode_part(dataset, pieces, found, layout, out.label, test))
    rows, total = offsets(comm, pieces, found, dataset.pieces())
    assert out.shard is not None
    out.x_test, out.y_test = part.x, part.y
    out.shard.test_rows, out.shard.total_test_rows = rows, total


def _on_zero(comm: Group, rows: np.ndarray, values: np.ndarray, total: int) -> np.ndarray | None:
    """Every rank's values, placed by row index, on rank 0 (labels: one number per row, never the features)."""
    received = comm.gather((rows, values))
    if received is None:
        return None
    whole = np.empty(total, dtype=values.dtype)
    for r, v in received:
        whole[r] = v
    return whole


def _identity(comm: Group, data: Prepared) -> str:
    """The data's fingerprint (``fingerprint.data_identity``'s role): every rank's arrays hashed where they are."""
    h = hashlib.sha256()
    arrays = [data.x.numeric, data.x.categorical, data.y]
    if data.x_test is not None and data.y_test is not None:
        arrays += [data.x_test.numeric, data.x_test.categorical, data.y_test]
    for a in arrays:
        h.update(str((a.dtype, a.shape)).encode())
        if a.size:
            h.update(np.ascontiguousarray(a).data.cast("B"))  # the array's own bytes: no copy of the shard
    meta = repr((data.pre.to_dict(), data.label.to_dict(), data.metric)).encode()
    digests = comm.all_gather(h.hexdigest())
    return hashlib.sha256(meta + "".join(digests).encode()).hexdigest()[:16]
