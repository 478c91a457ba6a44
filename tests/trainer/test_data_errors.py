"""Every bad-data case is one clear line that names the file (and the column where there is one)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tabjob_trainer.dataset import prepare
from tabjob_trainer.errors import DataError


def _prepare(path: Path, label: str = "y", problem: str = "auto") -> None:
    prepare(str(path), label, problem, "auto")


def _csv(tmp: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def _one_line(exc: pytest.ExceptionInfo[DataError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_missing_label_column(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,b\n1,2\n3,4\n")
    with pytest.raises(DataError) as exc:
        _prepare(path)
    assert _one_line(exc) == f"{path}: label column 'y' not found (columns: a, b)"


def test_empty_file(tmp_path: Path) -> None:
    path = _csv(tmp_path, "")
    with pytest.raises(DataError) as exc:
        _prepare(path)
    assert str(path) in _one_line(exc) and "empty" in str(exc.value)


def test_header_without_rows(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,y\n")
    with pytest.raises(DataError) as exc:
        _prepare(path)
    assert str(path) in _one_line(exc) and "no rows" in str(exc.value)


def test_unreadable_parquet(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    path.write_bytes(b"this is not parquet at all")
    with pytest.raises(DataError) as exc:
        _prepare(path)
    assert _one_line(exc).startswith(f"{path}: cannot read it as Parquet")


def test_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(DataError) as exc:
        _prepare(tmp_path / "nope.csv")
    assert _one_line(exc) == f"{tmp_path / 'nope.csv'}: file not found"


def test_label_with_one_class(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,y\n1,cat\n2,cat\n3,\n")
    with pytest.raises(DataError) as exc:
        _prepare(path)
    assert _one_line(exc) == (f"{path}: label column 'y' has a single class ('cat'); classification needs at least two")


def test_non_numeric_regression_label(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,y\n1,1.5\n2,2.5\n3,lots\n")
    with pytest.raises(DataError) as exc:
        _prepare(path, problem="regression")
    assert _one_line(exc) == f"{path}: column 'y' must be numeric for regression but holds 'lots'"


def test_all_missing_label(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,y\n1,\n2,\n")
    with pytest.raises(DataError) as exc:
        _prepare(path)
    assert "'y'" in _one_line(exc) and str(path) in str(exc.value)


def test_unknown_builtin() -> None:
    with pytest.raises(DataError) as exc:
        prepare("sklearn://titanic", "target", "auto", "auto")
    assert "breast_cancer" in _one_line(exc)


def test_csv_parquet_fsspec_and_builtin_agree(tmp_path: Path) -> None:
    df = pd.DataFrame({"a": [1.0, 2.0, None, 4.0], "c": ["x", "y", None, "x"], "y": ["p", "q", "p", "q"]})
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet")
    a = prepare(str(tmp_path / "t.csv"), "y", "auto", "auto")
    b = prepare(str(tmp_path / "t.parquet"), "y", "auto", "auto")
    c = prepare(f"file://{tmp_path / 't.parquet'}", "y", "auto", "auto")
    for other in (b, c):
        assert (other.y == a.y).all()
        assert (other.x.categorical == a.x.categorical).all()
    assert a.label.problem_type == "binary" and a.label.classes == ["p", "q"]
    train = prepare("sklearn://wine?split=train", "target", "auto", "auto")
    test = prepare("sklearn://wine?split=train", "target", "auto", "auto", test="sklearn://wine?split=test")
    assert train.label.problem_type == "multiclass" and len(train.y) + len(test.y_test) == 178  # type: ignore[arg-type]
    assert prepare("sklearn://diabetes", "target", "auto", "auto").metric == "rmse"


def test_metric_that_does_not_fit_the_problem(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,y\n1,1.5\n2,2.5\n3,7.25\n")
    with pytest.raises(DataError) as exc:
        prepare(str(path), "y", "auto", "accuracy")
    assert "accuracy" in _one_line(exc) and "regression" in str(exc.value)


def test_latin1_csv_decodes_to_the_same_categories_as_utf8() -> None:
    # pyarrow kept invalid UTF-8 as bytes: categories were "b'caf\\xe9'" and predicted differently from UTF-8 rows.
    hostile = Path(__file__).parent / "hostile"
    latin1 = prepare(str(hostile / "latin1.csv"), "y", "auto", "auto")
    utf8 = prepare(str(hostile / "utf8.csv"), "y", "auto", "auto")
    assert latin1.pre.categories == utf8.pre.categories
    assert set(latin1.pre.categories["word"]) == {"café", "naïve", "über", "plain"}
    assert (latin1.x.categorical == utf8.x.categorical).all()


def test_fsspec_memory_filesystem_and_installed_cloud_filesystems(tmp_path: Path) -> None:
    import fsspec

    with fsspec.open("memory://tabjob-test/t.csv", "w") as fh:
        fh.write("a,y\n1,p\n2,q\n3,p\n")
    assert prepare("memory://tabjob-test/t.csv", "y", "auto", "auto").label.classes == ["p", "q"]
    # s3:// and gs:// resolve to a filesystem (no ImportError), without touching the network.
    assert fsspec.get_filesystem_class("s3").__name__ == "S3FileSystem"
    assert "GcsFileSystem" in fsspec.get_filesystem_class("gs").__name__


def test_trainer_extra_carries_the_cloud_filesystems() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[2]
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["trainer"]
    assert {d.split(">")[0].split("=")[0] for d in extra} >= {"fsspec", "s3fs", "gcsfs"}
