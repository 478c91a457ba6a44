"""Rows of a rank's table without copying them: what a sharded fit hands a family for its training and validation
rows. LightGBM reads them as a ``Sequence`` and XGBoost as a ``DataIter``, batch by batch, so a fit holds its shard once
(as float32) plus the libraries' binned copies (a byte or two a value), never a second float copy of its training
rows; any other use (a network's tensors, a prediction) materialises the copy, once."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tabjob_trainer.preprocess import Encoded

BATCH_ROWS = 65_536


class RowView(Encoded):
    """Rows ``index`` of ``base``, copied only when an array is asked for."""

    def __init__(self, base: Encoded, index: np.ndarray) -> None:  # no dataclass init: nothing is copied
        self.base, self.index = base, np.asarray(index, dtype=np.int64)
        self._copy: Encoded | None = None

    def _materialised(self) -> Encoded:
        if self._copy is None:
            self._copy = Encoded(self.base.numeric[self.index], self.base.categorical[self.index])
        return self._copy

    @property
    def numeric(self) -> np.ndarray:  # type: ignore[override]
        return self._materialised().numeric

    @property
    def categorical(self) -> np.ndarray:  # type: ignore[override]
        return self._materialised().categorical

    @property
    def width(self) -> tuple[int, int]:
        return self.base.numeric.shape[1], self.base.categorical.shape[1]

    def __len__(self) -> int:
        return len(self.index)

    def take(self, idx: np.ndarray) -> RowView:
        return RowView(self.base, self.index[idx])

    def matrix(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of the view as one float32 matrix: numeric columns, then category codes (missing
        and unseen codes as NaN), as the tree families read them."""
        rows = self.index[start:stop]
        numeric = self.base.numeric[rows]
        if self.base.categorical.shape[1] == 0:
            return numeric
        codes = self.base.categorical[rows].astype(np.float32)
        codes[codes < 0] = np.nan
        return np.hstack([numeric, codes])

    def batches(self, rows: int = BATCH_ROWS) -> Iterator[tuple[int, int]]:
        for start in range(0, len(self.index), rows):
            yield start, min(start + rows, len(self.index))
