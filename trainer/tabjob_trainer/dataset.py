"""The data the models train on: read the tables, check the label, preprocess (``prepare``).

Tables are CSV or Parquet files, or directories / prefixes of them with hive partitions (storage/datasets.py),
from local paths, s3://, gs:// and other fsspec URIs, or built-in datasets.

Built-in datasets use the ``sklearn://NAME`` scheme and are backed by the datasets scikit-learn ships inside
its wheel (no download): ``breast_cancer`` (binary), ``wine`` and ``iris`` (multiclass), ``diabetes``
(regression). ``?split=train`` / ``?split=test`` picks a fixed, stratified 80/20 part so a manifest can name a
test table too; the label column is ``target``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlparse

import numpy as np
import pandas as pd

from tabjob.contracts.results import DataSummary
from tabjob.families import BUILTIN_DATASETS, BUILTIN_LABEL, BUILTIN_SCHEME
from tabjob_trainer.errors import DataError
from tabjob_trainer.metrics import resolve_metric
from tabjob_trainer.preprocess import Encoded, Preprocessor
from tabjob_trainer.problem import LabelInfo, resolve_label
from tabjob_trainer.sharded.info import ShardInfo
from tabjob_trainer.storage.datasets import open_dataset, read
from tabjob_trainer.storage.filesystems import UnknownScheme


def _load_builtin(name: str) -> pd.DataFrame:
    """scikit-learn's ``load_<name>`` for a dataset families.BUILTIN_DATASETS declares."""
    from sklearn import datasets

    loader: Callable[..., object] = getattr(datasets, f"load_{name}")
    df: pd.DataFrame = getattr(loader(as_frame=True), "frame").copy()  # noqa: B009 -- sklearn's Bunch is untyped
    return df


def read_table(uri: str) -> pd.DataFrame:
    """Read the table ``uri`` names (a file, or a directory / prefix of files: storage/datasets.py) into a
    DataFrame; every failure is a DataError that names the file (a StorageError where the store failed)."""
    if uri.startswith(BUILTIN_SCHEME):
        return _read_builtin(uri)
    try:
        dataset = open_dataset(uri)
        table = read(dataset)
    except UnknownScheme as exc:
        raise UnknownScheme(exc.uri, exc.scheme, "sklearn://NAME") from None
    if table.num_rows == 0:
        if dataset.single_file:
            raise DataError(f"{uri}: the table has a header but no rows")
        raise DataError(f"{uri}: none of its {len(dataset.files)} files has a row")
    # One block per column, Arrow buffers released as they convert: pandas makes no consolidation copy.
    return table.to_pandas(split_blocks=True, self_destruct=True)


def _read_builtin(uri: str) -> pd.DataFrame:
    parsed = urlparse(uri)
    name = parsed.netloc or parsed.path.lstrip("/")
    if name not in BUILTIN_DATASETS:
        raise DataError(f"{uri}: no built-in dataset {name!r}; choose one of {', '.join(BUILTIN_DATASETS)}")
    df = _load_builtin(name)
    classification = BUILTIN_DATASETS[name] != "regression"
    split = parse_qs(parsed.query).get("split", ["all"])[0]
    if split == "all":
        return df
    if split not in ("train", "test"):
        raise DataError(f"{uri}: split must be train, test or all, not {split!r}")
    train_idx, test_idx = builtin_split(df[BUILTIN_LABEL].to_numpy(), classification)
    return df.iloc[train_idx if split == "train" else test_idx].reset_index(drop=True)


def builtin_split(y: np.ndarray, classification: bool, test_fraction: float = 0.2) -> tuple[np.ndarray, ...]:
    """A fixed 80/20 split (seed 0), stratified for classification, so train and test never overlap."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    train, test = train_test_split(idx, test_size=test_fraction, random_state=0, stratify=y if classification else None)
    return np.sort(train), np.sort(test)


# ------------------------------------------------------------------------------------ model-ready arrays


@dataclass
class Prepared:
    x: Encoded
    y: np.ndarray
    label: LabelInfo
    pre: Preprocessor
    metric: str
    x_test: Encoded | None = None
    y_test: np.ndarray | None = None
    shard: ShardInfo | None = None  # read sharded: x and y are this rank's rows only (sharded/)

    @property
    def n_classes(self) -> int:
        return len(self.label.classes)

    @property
    def rows(self) -> int:
        """Rows of the whole training table (with a label), on every rank however it was read."""
        return self.shard.total_rows if self.shard else len(self.y)

    @property
    def test_rows(self) -> int:
        if self.shard:
            return self.shard.total_test_rows
        return len(self.x_test) if self.x_test is not None else 0

    def whole_labels(self) -> Prepared:
        """What rank 0's leaderboard scores against: every row's label (read sharded, the rows stay where they are
        and only the labels came to rank 0)."""
        if self.shard is None:
            return self
        assert self.shard.y_all is not None, "only rank 0 holds every row's label"
        empty = Encoded(np.empty((0, self.x.numeric.shape[1]), np.float32), np.empty((0, 0), np.int64))
        return Prepared(empty, self.shard.y_all, self.label, self.pre, self.metric, None, self.shard.y_test_all)


def prepare(train: str, label: str, problem_type: str, eval_metric: str, test: str | None = None) -> Prepared:
    df = read_table(train)
    info = resolve_label(df, label, problem_type, train)
    df = _drop_missing_labels(df, label)
    try:
        metric = resolve_metric(eval_metric, info.problem_type)
    except ValueError as exc:
        raise DataError(f"{train}: column {label!r}: {exc}") from None
    pre = Preprocessor.fit(df, label)
    out = Prepared(pre.transform(df, train), info.encode(df[label], train, label), info, pre, metric)
    if test:
        tdf = read_table(test)
        if label not in tdf.columns:
            raise DataError(f"{test}: label column {label!r} not found in the test data")
        tdf = _drop_missing_labels(tdf, label)
        out.x_test = pre.transform(tdf, test)
        out.y_test = info.encode(tdf[label], test, label)
    return out


def _drop_missing_labels(df: pd.DataFrame, label: str) -> pd.DataFrame:
    keep = df[label].notna()
    return df if bool(keep.all()) else df[keep].reset_index(drop=True)


def data_summary(p: Prepared, reading: str | None = None, rank_rows: list[int] | None = None) -> DataSummary:
    return DataSummary(
        reading=reading,
        rank_rows=rank_rows,
        rows=p.rows,
        features=len(p.pre.feature_names),
        categorical=len(p.pre.categorical),
        problem_type=p.label.problem_type,
        classes=len(p.label.classes),
        eval_metric=p.metric,
        test_rows=p.test_rows,
    )
