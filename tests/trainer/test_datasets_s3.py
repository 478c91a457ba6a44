"""A table is a file or a dataset, on a real S3 server (SeaweedFS, tests/s3fixtures.py): the same datasets read from
a prefix as from local disk, and each refusal of the store (missing bucket or prefix, wrong or missing keys) one
line with reason DataUnavailable that names the URI and the identity, and never the secret."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hack.s3.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedS3
from tabjob_trainer.dataset import read_table
from tabjob_trainer.errors import DataError
from tabjob_trainer.storage.datasets import Piece, open_dataset, read, read_pieces
from tabjob_trainer.storage.filesystems import StorageError, filesystem
from tests.s3proxy import FaultyProxy


def upload(local: Path, uri: str) -> None:
    """Every file under `local` to the prefix `uri`, through the same filesystem() the reader uses."""
    fs, root = filesystem(uri)
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        with fs.open_output_stream(f"{root}/{path.relative_to(local).as_posix()}") as out:
            out.write(path.read_bytes())


def _hive(root: Path) -> Path:
    for i, (region, year) in enumerate([("eu", 2024), ("eu", 2025), ("us", 2024)]):
        folder = root / f"region={region}" / f"year={year}"
        folder.mkdir(parents=True)
        frame = pd.DataFrame({"x": [float(i * 10 + k) for k in range(5)], "y": ["p", "q", "p", "q", "p"]})
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), folder / "part-0.parquet", row_group_size=2)
    (root / "_SUCCESS").write_text("")
    return root


def test_a_prefix_reads_as_the_same_files_on_local_disk(tmp_path: Path, s3_bucket: str) -> None:
    local = _hive(tmp_path / "t")
    upload(local, f"s3://{s3_bucket}/tables/t")
    remote = open_dataset(f"s3://{s3_bucket}/tables/t/")
    here = open_dataset(str(local))
    assert remote.partitioning == here.partitioning == ("region", "year")
    assert [f.uri for f in remote.files] == [
        f"s3://{s3_bucket}/tables/t/region=eu/year=2024/part-0.parquet",
        f"s3://{s3_bucket}/tables/t/region=eu/year=2025/part-0.parquet",
        f"s3://{s3_bucket}/tables/t/region=us/year=2024/part-0.parquet",
    ]
    assert [(f.rows, f.row_groups, f.partition, f.size) for f in remote.files] == [
        (f.rows, f.row_groups, f.partition, f.size) for f in here.files
    ]
    assert remote.schema == here.schema and remote.uncompressed_bytes == here.uncompressed_bytes
    assert read(remote).equals(read(here))
    pieces = [Piece(2, 1), Piece(0, 0)]
    assert read_pieces(remote, pieces).equals(read_pieces(here, pieces))
    pd.testing.assert_frame_equal(read_table(f"s3://{s3_bucket}/tables/t"), read_table(str(local)))


def test_a_single_csv_object_and_its_prefix(tmp_path: Path, s3_bucket: str) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.csv").write_text("a,y\n1,p\n2,q\n")
    (tmp_path / "c" / "b.csv").write_text("a,y\n3,\n")
    upload(tmp_path / "c", f"s3://{s3_bucket}/c")
    assert read_table(f"s3://{s3_bucket}/c/a.csv").to_dict("list") == {"a": [1, 2], "y": ["p", "q"]}
    both = read_table(f"s3://{s3_bucket}/c")
    assert both["a"].tolist() == [1, 2, 3] and both["y"].tolist()[:2] == ["p", "q"] and both["y"].isna().tolist()[2]


def test_files_that_disagree_are_refused_naming_the_object_and_column(tmp_path: Path, s3_bucket: str) -> None:
    (tmp_path / "t").mkdir()
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), tmp_path / "t" / "p0.parquet")
    pq.write_table(pa.table({"a": ["1"], "b": ["z"]}), tmp_path / "t" / "p1.parquet")
    upload(tmp_path / "t", f"s3://{s3_bucket}/t")
    with pytest.raises(DataError) as exc:
        open_dataset(f"s3://{s3_bucket}/t")
    assert str(exc.value).startswith(
        f"s3://{s3_bucket}/t/p1.parquet: column 'a' is string here but int64 in s3://{s3_bucket}/t/p0.parquet"
    )


def test_a_prefix_without_data_files_names_what_it_found(tmp_path: Path, s3_bucket: str) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "_SUCCESS").write_text("")
    (tmp_path / "t" / "manifest.json").write_text("{}")
    upload(tmp_path / "t", f"s3://{s3_bucket}/t")
    with pytest.raises(DataError) as exc:
        open_dataset(f"s3://{s3_bucket}/t")
    assert str(exc.value).startswith(f"s3://{s3_bucket}/t: no data files under it")
    assert str(exc.value).endswith("found only 2 other file(s): _SUCCESS, manifest.json")


def test_a_missing_prefix_or_bucket_is_data_unavailable(s3_bucket: str, s3_server: SeaweedS3) -> None:
    for uri, what in [
        (f"s3://{s3_bucket}/nothing/here", "not found: no object or prefix of that name"),
        (f"s3://{s3_bucket}-gone/t/part-0.parquet", f"bucket {s3_bucket}-gone does not exist"),
        (f"s3://{s3_bucket}-gone", f"bucket {s3_bucket}-gone does not exist"),
    ]:
        with pytest.raises(StorageError) as exc:
            read_table(uri)
        assert exc.value.reason == "DataUnavailable"
        assert str(exc.value) == (
            f"{uri}: {what}; identity: access key tabj...cess (AWS_ACCESS_KEY_ID); endpoint: {s3_server.endpoint}"
        )


def test_wrong_keys_fail_at_once_naming_the_uri_and_the_key_id(
    tmp_path: Path, s3_bucket: str, s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = _hive(tmp_path / "t")
    upload(local, f"s3://{s3_bucket}/t")
    uri = f"s3://{s3_bucket}/t"
    with FaultyProxy(s3_server.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        assert open_dataset(uri).rows == 15  # through the proxy, with the right keys
        for key, secret in [(ACCESS_KEY, "not-the-secret"), ("AKIAWRONGKEY0001", SECRET_KEY)]:
            monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
            proxy.reset()
            with pytest.raises(StorageError) as exc:
                read_table(uri)
            message = str(exc.value)
            assert exc.value.reason == "DataUnavailable"
            assert message.startswith(f"{uri}: access denied (")
            assert (
                f"identity: access key {key[:4]}...{key[-4:]} (AWS_ACCESS_KEY_ID); endpoint: {proxy.endpoint}"
                in message
            )
            assert secret not in message and "\n" not in message
            # A refusal is permanent: one request, not a retry storm.
            assert proxy.count() == 1, proxy.requests


def test_missing_credentials_say_there_were_none(
    tmp_path: Path, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = _hive(tmp_path / "t")
    upload(local, f"s3://{s3_bucket}/t")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance to ask here
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(StorageError) as exc:
        open_dataset(f"s3://{s3_bucket}/t")
    assert str(exc.value).startswith(f"s3://{s3_bucket}/t: access denied (")
    assert "identity: no credentials in the environment" in str(exc.value)
