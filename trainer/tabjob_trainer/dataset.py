"""The data the models train on: read the tables, check the label, preprocess (``prepare``).

Tables are CSV or Parquet from local paths, fsspec URIs, or built-in datasets.

Built-in datasets use the ``sklearn://NAME`` scheme and are backed by the datasets scikit-learn ships inside
its wheel (no download): ``breast_cancer`` (binary), ``wine`` and ``iris`` (multiclass), ``diabetes``
(regression). ``?split=train`` / ``?split=test`` picks a fixed, stratified 80/20 part so a manifest can name a
test table too; the label column is ``target``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tabjob.families import BUILTIN_DATASETS, BUILTIN_LABEL, BUILTIN_SCHEME
from tabjob.results_model import DataSummary
from tabjob_trainer.errors import DataError
from tabjob_trainer.metrics import resolve_metric
from tabjob_trainer.preprocess import Encoded, Preprocessor
from tabjob_trainer.problem import LabelInfo, resolve_label

_PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
_CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".tsv", ".txt")


def _load_builtin(name: str) -> pd.DataFrame:
    """scikit-learn's ``load_<name>`` for a dataset families.BUILTIN_DATASETS declares."""
    from sklearn import datasets

    loader: Callable[..., object] = getattr(datasets, f"load_{name}")
    df: pd.DataFrame = getattr(loader(as_frame=True), "frame").copy()  # noqa: B009 -- sklearn's Bunch is untyped
    return df


def read_table(uri: str) -> pd.DataFrame:
    """Read ``uri`` into a DataFrame; every failure is a DataError that names the file."""
    if uri.startswith(BUILTIN_SCHEME):
        return _read_builtin(uri)
    try:
        table = _read_arrow(uri)
    except DataError:
        raise
    except FileNotFoundError:
        raise DataError(f"{uri}: file not found") from None
    except (pa.ArrowInvalid, OSError, ValueError) as exc:
        first = _readable(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        if "Empty CSV file" in first:
            raise DataError(f"{uri}: the file is empty (no header, no rows)") from None
        raise DataError(f"{uri}: cannot read it as {_kind(uri)}: {first}") from None
    if table.num_rows == 0:
        raise DataError(f"{uri}: the table has a header but no rows")
    names = table.column_names
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise DataError(
            f"{uri}: column {repeated[0]!r} appears {names.count(repeated[0])} times in the header; "
            "column names must be unique"
        )
    # One block per column, Arrow buffers released as they convert: pandas makes no consolidation copy.
    return table.to_pandas(split_blocks=True, self_destruct=True)


def _readable(message: str) -> str:
    """pyarrow echoes the offending row, which in a binary file is noise: keep the reason, printable, short."""
    message = re.sub(r"(Expected \d+ columns, got \d+):.*", r"\1 in a row (is it a CSV file?)", message)
    message = "".join(c if c.isprintable() else "?" for c in message)
    return message if len(message) <= 200 else message[:197] + "..."


def _kind(uri: str) -> str:
    return "Parquet" if _is_parquet(uri) else "CSV"


def _is_parquet(uri: str) -> bool:
    path = urlparse(uri).path if "://" in uri else uri
    if path.lower().endswith(_PARQUET_SUFFIXES):
        return True
    if path.lower().endswith(_CSV_SUFFIXES):
        return False
    # No telling suffix: Parquet files start with the magic bytes PAR1.
    try:
        with _open(uri) as fh:
            return bool(fh.read(4) == b"PAR1")
    except FileNotFoundError:
        raise
    except OSError:
        return False


def _open(uri: str) -> Any:
    if "://" in uri and not uri.startswith("file://"):
        import fsspec

        scheme = uri.split("://", 1)[0]
        try:
            return fsspec.open(uri, "rb").open()
        except ImportError as exc:
            # fsspec knows the scheme but its filesystem package is not installed here.
            raise DataError(
                f"{uri}: no filesystem for {scheme}:// is installed in this image ({exc}); s3:// and gs:// come "
                "with tabjob[trainer] (s3fs, gcsfs)"
            ) from None
        except ValueError as exc:
            if "Protocol not known" not in str(exc):
                raise
            raise DataError(
                f"{uri}: unknown scheme {scheme}://; use a local path, file://, s3://, gs://, another fsspec "
                "scheme or sklearn://NAME"
            ) from None
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    return open(path, "rb")


def _read_arrow(uri: str) -> pa.Table:
    local = not ("://" in uri and not uri.startswith("file://"))
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    if local:
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            raise DataError(f"{uri}: the file is empty (0 bytes)")
    parquet = _is_parquet(uri)
    if parquet:
        if local:
            return pq.read_table(path)
        with _open(uri) as fh:
            return pq.read_table(fh)
    table = _read_csv(uri, path, local, "utf8")
    if any(pa.types.is_binary(t) or pa.types.is_large_binary(t) for t in table.schema.types):
        # Not valid UTF-8: pyarrow keeps such columns as bytes, whose categories would never match the same rows
        # saved as UTF-8. Such files are almost always Latin-1 (Excel, older exports): decode the file as that.
        table = _read_csv(uri, path, local, "latin1")
    return table


def _read_csv(uri: str, path: str, local: bool, encoding: str) -> pa.Table:
    options = _csv_options(path if local else uri)
    options["read_options"] = pacsv.ReadOptions(encoding=encoding)
    if local:
        # pyarrow reads local files with its own multi-threaded readers; fsspec would only add a copy.
        return pacsv.read_csv(path, **options)
    with _open(uri) as fh:
        return pacsv.read_csv(fh, **options)


def _csv_options(path: str) -> dict[str, object]:
    # Empty cells are missing values in string columns too, as pandas reads them (pyarrow's default is "").
    options: dict[str, object] = {"convert_options": pacsv.ConvertOptions(strings_can_be_null=True)}
    if path.lower().endswith(".tsv"):
        options["parse_options"] = pacsv.ParseOptions(delimiter="\t")
    return options


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

    @property
    def n_classes(self) -> int:
        return len(self.label.classes)


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


def data_summary(p: Prepared) -> DataSummary:
    return DataSummary(
        rows=len(p.x),
        features=len(p.pre.feature_names),
        categorical=len(p.pre.categorical),
        problem_type=p.label.problem_type,
        classes=len(p.label.classes),
        eval_metric=p.metric,
        test_rows=len(p.x_test) if p.x_test is not None else 0,
    )
