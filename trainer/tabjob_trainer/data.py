"""Reading training and test tables: CSV or Parquet from local paths, fsspec URIs, or built-in datasets.

Built-in datasets use the ``sklearn://NAME`` scheme and are backed by the datasets scikit-learn ships inside
its wheel (no download): ``breast_cancer`` (binary), ``wine`` and ``iris`` (multiclass), ``diabetes``
(regression). ``?split=train`` / ``?split=test`` picks a fixed, stratified 80/20 part so a manifest can name a
test table too; the label column is ``target``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tabjob.families import BUILTIN_DATASETS, BUILTIN_LABEL, BUILTIN_SCHEME
from tabjob_trainer.errors import DataError

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
