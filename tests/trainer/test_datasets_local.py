"""A table is a file or a dataset (storage/datasets.py), on local disk: directories of part files, hive partitions,
the schema rule, pieces, and every refusal naming the path (and the file and column where there is one)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from tabjob_trainer.dataset import prepare, read_table
from tabjob_trainer.errors import DataError
from tabjob_trainer.storage.datasets import Piece, open_dataset, read, read_pieces
from tabjob_trainer.storage.filesystems import StorageError


def _parts(root: Path, frames: list[pd.DataFrame], row_group_size: int = 2) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, frame in enumerate(frames):
        path = root / f"part-{i:05d}.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=row_group_size)
        paths.append(path)
    return paths


def _frame(start: int, rows: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "x": [float(i) for i in range(start, start + rows)],
            "c": [f"s{i % 3}" for i in range(rows)],
            "y": [0, 1] * (rows // 2) + [0] * (rows % 2),
        }
    )


def test_directory_of_part_files_is_one_table_in_path_order(tmp_path: Path) -> None:
    frames = [_frame(0, 5), _frame(5, 3), _frame(8, 4)]
    _parts(tmp_path / "t", frames)
    # What Spark and friends leave beside the data, and a README: none of it is data.
    (tmp_path / "t" / "_SUCCESS").write_text("")
    (tmp_path / "t" / ".part-00000.parquet.crc").write_bytes(b"crc")
    (tmp_path / "t" / "_temporary" / "0").mkdir(parents=True)
    (tmp_path / "t" / "_temporary" / "0" / "part-9.parquet").write_bytes(b"half written")
    (tmp_path / "t" / "README.md").write_text("the table")
    dataset = open_dataset(str(tmp_path / "t"))
    assert [Path(f.path).name for f in dataset.files] == [
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    assert dataset.format == "parquet" and dataset.rows == 12 and dataset.partitioning == ()
    assert [f.row_groups for f in dataset.files] == [(2, 2, 1), (2, 1), (2, 2)]
    assert dataset.files[0].uri == f"{tmp_path / 't'}/part-00000.parquet"
    assert dataset.uncompressed_bytes == sum(
        pq.ParquetFile(f.path).metadata.row_group(g).total_byte_size
        for f in dataset.files
        for g in range(len(f.row_groups))
    )
    expected = pd.concat(frames, ignore_index=True)
    pd.testing.assert_frame_equal(read(dataset).to_pandas(), expected)
    pd.testing.assert_frame_equal(read_table(str(tmp_path / "t")), expected)
    p = prepare(str(tmp_path / "t"), "y", "auto", "auto")
    assert len(p.y) == 12 and p.label.problem_type == "binary"


def test_hive_partitions_become_columns_typed_as_pyarrow_types_them(tmp_path: Path) -> None:
    root = tmp_path / "t"
    layout = [("eu", "2024"), ("eu", "2025"), ("us%20east", "2024"), ("__HIVE_DEFAULT_PARTITION__", "2025")]
    for i, (region, year) in enumerate(layout):
        _parts(root / f"region={region}" / f"year={year}", [_frame(i * 10, 3)])
    dataset = open_dataset(str(root))
    assert dataset.partitioning == ("region", "year")
    assert [f.partition for f in dataset.files][:2] == [
        (("region", None), ("year", 2025)),
        (("region", "eu"), ("year", 2024)),
    ]
    table = read(dataset)
    oracle = pads.dataset(str(root), partitioning="hive").to_table()
    assert table.schema == oracle.schema
    assert table.schema.field("year").type == pa.int32() and table.schema.field("region").type == pa.string()
    key = ["region", "year", "x"]
    ours = table.to_pandas().sort_values(key, na_position="first").reset_index(drop=True)
    theirs = oracle.to_pandas().sort_values(key, na_position="first").reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs)
    assert set(ours["region"].dropna()) == {"eu", "us east"} and ours["region"].isna().sum() == 3


def test_read_pieces_is_the_matching_slice_of_the_whole(tmp_path: Path) -> None:
    _parts(tmp_path / "t", [_frame(0, 5), _frame(5, 4), _frame(9, 6)])
    dataset = open_dataset(str(tmp_path / "t"))
    whole = read(dataset)
    starts, at = {}, 0
    for piece in dataset.pieces():
        starts[piece] = at
        at += dataset.piece_rows(piece) or 0
    assert at == whole.num_rows == dataset.rows
    chosen = [Piece(2, 2), Piece(0, 1), Piece(0, 2), Piece(1, 0)]
    expected = pa.concat_tables([whole.slice(starts[p], dataset.piece_rows(p)) for p in chosen])
    assert read_pieces(dataset, chosen).equals(expected)
    assert read_pieces(dataset, [(1, None)]).equals(whole.slice(5, 4))
    assert read_pieces(dataset, []).num_rows == 0
    with pytest.raises(IndexError, match="no row group 3; it has 3"):
        read_pieces(dataset, [Piece(0, 3)])


def test_files_that_disagree_name_the_first_that_differs_and_the_column(tmp_path: Path) -> None:
    good = _frame(0, 4)
    for name, bad, message in [
        ("missing", good.drop(columns=["c"]), r"column 'c' is missing \(it is in {first}\)"),
        ("extra", good.assign(z=1.5), "column 'z' is not in {first}"),
        ("type", good.assign(x=good["x"].astype(str)), "column 'x' is (large_)?string here but double in {first}"),
    ]:
        root = tmp_path / name
        paths = _parts(root, [good, good, bad, bad])
        with pytest.raises(DataError) as exc:
            open_dataset(str(root))
        assert re.match(re.escape(f"{paths[2]}: ") + message.format(first=re.escape(str(paths[0]))), str(exc.value))
        assert isinstance(exc.value, DataError) and not isinstance(exc.value, StorageError)


def test_harmless_differences_read_as_the_wider_type(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    pq.write_table(
        pa.table(
            {
                "i": pa.array([1, 2], pa.int32()),
                "f": pa.array([1, 2], pa.int64()),
                "n": pa.nulls(2),
                "k": pa.array(["a", "b"]).dictionary_encode(),
            }
        ),
        root / "a.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "i": pa.array([2**40], pa.int64()),
                "f": pa.array([0.5], pa.float32()),
                "n": pa.array(["t"]),
                "k": pa.array(["c"]),
            }
        ),
        root / "b.parquet",
    )
    dataset = open_dataset(str(root))
    assert [str(t) for t in dataset.schema.types] == ["int64", "double", "string", "string"]
    table = read(dataset)
    assert table.schema == dataset.schema
    assert table.to_pydict() == {"i": [1, 2, 2**40], "f": [1.0, 2.0, 0.5], "n": [None, None, "t"], "k": ["a", "b", "c"]}


def test_what_is_not_a_dataset_is_refused_naming_the_path(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"empty: no data files under it .*; it is empty$"):
        open_dataset(str(tmp_path / "empty"))
    (tmp_path / "other").mkdir()
    for name in ("_SUCCESS", "notes.json", "model.bin"):
        (tmp_path / "other" / name).write_text("{}")
    with pytest.raises(DataError) as exc:
        open_dataset(str(tmp_path / "other"))
    assert str(exc.value).startswith(f"{tmp_path / 'other'}: no data files under it")
    assert str(exc.value).endswith("found only 3 other file(s): _SUCCESS, model.bin, notes.json")
    with pytest.raises(StorageError) as missing:
        open_dataset(str(tmp_path / "nope"))
    assert str(missing.value) == f"{tmp_path / 'nope'}: file not found" and missing.value.reason == "DataUnavailable"
    mixed = tmp_path / "mixed"
    _parts(mixed, [_frame(0, 2)])
    _frame(0, 2).to_csv(mixed / "extra.csv", index=False)
    with pytest.raises(DataError, match=r"mixes Parquet \(.*part-00000.parquet\) and CSV \(.*extra.csv\) files"):
        read_table(str(mixed))


def test_partition_keys_must_agree_and_not_shadow_a_column(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _parts(root / "region=eu", [_frame(0, 2)])
    _parts(root / "other", [_frame(0, 2)])
    with pytest.raises(DataError, match=r"region=eu/part-00000.parquet: sits under region=... but .*other/part-00000"):
        open_dataset(str(root))
    clash = tmp_path / "clash"
    _parts(clash / "c=s0", [_frame(0, 2)])
    with pytest.raises(DataError, match=r"column 'c' is both a partition directory \(c=\.\.\.\) and a column"):
        open_dataset(str(clash))


def test_csv_directory_unifies_types_as_one_file_would(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    (root / "a.csv").write_text("id,v,y\n1,1,p\n2,2,q\n")
    (root / "b.csv").write_text("id,v,y\n0A7,2.5,p\n,3,q\n")
    (root / "c.csv").write_bytes("id,v,y\n9,4,caf\xe9\n".encode("latin-1"))
    (root / "d.csv").write_text("")  # an empty part file: nothing to read
    dataset = open_dataset(str(root))
    assert dataset.format == "csv" and dataset.rows is None and len(dataset.files) == 3
    table = read(dataset)
    assert table.schema.field("v").type == pa.float64()
    # A column that is text in one file is text in all, read as written (not numbers cast back to text).
    assert table.column("id").to_pylist() == ["1", "2", "0A7", None, "9"]
    assert table.column("y").to_pylist() == ["p", "q", "p", "q", "café"]
    (root / "e.csv").write_text("id,w,y\n1,1,p\n")
    with pytest.raises(DataError, match=r"e.csv: column 'v' is missing \(it is in .*a.csv\)"):
        open_dataset(str(root))


def test_a_repeated_column_in_one_part_file_names_that_file(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    (root / "a.csv").write_text("a,b\n1,2\n")
    (root / "b.csv").write_text("a,a\n1,2\n")
    with pytest.raises(DataError, match=r"b.csv: column 'a' appears 2 times in the header"):
        read_table(str(root))


def test_an_empty_parquet_part_is_refused(tmp_path: Path) -> None:
    _parts(tmp_path / "t", [_frame(0, 2)])
    (tmp_path / "t" / "part-00001.parquet").write_bytes(b"")
    with pytest.raises(DataError, match=r"part-00001.parquet: the file is empty \(0 bytes\)"):
        open_dataset(str(tmp_path / "t"))


def test_a_dataset_without_rows_says_so(tmp_path: Path) -> None:
    _parts(tmp_path / "t", [_frame(0, 0), _frame(0, 0)])
    with pytest.raises(DataError, match=r"t: none of its 2 files has a row$"):
        read_table(str(tmp_path / "t"))
