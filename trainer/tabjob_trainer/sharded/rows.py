"""A row's identity and its fold, the same whatever the number of ranks (pure).

A row is named by where it sits in the dataset: (file index in the dataset's sorted order, row group index, offset
within the row group; a CSV file is one row group). Its 64-bit key mixes the three with splitmix64, and its fold for a
bag set is the key mixed again with the bag set, modulo the folds: a hash, so each fold holds about 1/k of the rows
(not exactly, and not stratified by the label as the one-process folds are), and a row's fold depends only on the
row and the bag set, never on which rank reads it or how many ranks there are.
"""

from __future__ import annotations

import numpy as np

from tabjob_trainer.splits import HOLDOUT_FRACTION

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_HOLDOUT_SALT = 0x5EED  # the holdout split of an unbagged fit is a hash of its own, apart from every bag set's folds


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over uint64 values (wrapping arithmetic, vectorised)."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def row_keys(file: int, row_group: int, rows: int, start: int = 0) -> np.ndarray:
    """The keys of rows ``start .. start + rows - 1`` of one row group."""
    base = mix(mix(np.asarray([file], dtype=np.uint64)) ^ np.uint64(row_group))
    return mix(base ^ np.arange(start, start + rows, dtype=np.uint64))


def fold_of(keys: np.ndarray, bag_set: int, folds: int) -> np.ndarray:
    """Each row's fold (0 .. folds-1) in bag set ``bag_set``."""
    salted = mix(keys ^ mix(np.asarray([bag_set], dtype=np.uint64)))
    return (salted % np.uint64(folds)).astype(np.int64)


def in_holdout(keys: np.ndarray) -> np.ndarray:
    """Rows an unbagged fit validates on: about HOLDOUT_FRACTION of them."""
    salted = mix(keys ^ mix(np.asarray([_HOLDOUT_SALT], dtype=np.uint64)))
    buckets = np.uint64(10_000)
    return (salted % buckets) < np.uint64(round(HOLDOUT_FRACTION * 10_000))


def split(keys: np.ndarray, folds: int, bag_set: int, fold: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, validation indices) into this rank's rows, for one fit."""
    val = in_holdout(keys) if fold is None else fold_of(keys, bag_set, folds) == fold
    return np.flatnonzero(~val), np.flatnonzero(val)
