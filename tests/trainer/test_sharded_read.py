"""The sharded reader: each rank reads only its row groups, the ranks agree on the preprocessing from summaries alone,
and a row's fold is the same whatever the number of ranks. Ranks run as threads here (tests/trainer/sharded_helpers.py);
tests/trainer/test_sharded_jobs.py runs them as torchrun processes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tabjob_trainer.sharded.load as load
from tabjob.planner.sharding import assign
from tabjob_trainer.dataset import Prepared, prepare
from tabjob_trainer.errors import DataError
from tabjob_trainer.sharded import rows, summaries
from tabjob_trainer.sharded.prepare import prepare_sharded
from tabjob_trainer.storage.datasets import open_dataset, read_pieces
from tests.trainer.sharded_helpers import ThreadGroup, mixed_frame, write_dataset


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(mixed_frame(3000, seed=4), tmp_path_factory.mktemp("t") / "train", files=4, row_group_rows=250)


def sharded(uri: str, world: int, test: str | None = None) -> list[Prepared]:
    dataset = open_dataset(uri)
    return ThreadGroup(world).run(lambda m: prepare_sharded(dataset, "label", "auto", "auto", test, m))


def test_each_rank_reads_only_its_row_groups(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read: Counter[tuple[int, int | None]] = Counter()
    rows_read: Counter[tuple[int, int | None]] = Counter()

    def counting(dataset: Any, pieces: Any, columns: Any = None) -> Any:
        out = read_pieces(dataset, pieces, columns)
        for p in pieces:
            read[(p[0], p[1])] += 1
            rows_read[(p[0], p[1])] = out.num_rows
        return out

    monkeypatch.setattr(load, "read_pieces", counting)
    dataset = open_dataset(str(table))
    parts = sharded(str(table), 3)
    shares = assign([dataset.piece_rows(p) or 0 for p in dataset.pieces()], 3)
    for rank, part in enumerate(parts):
        assert part.shard is not None
        mine = [dataset.pieces()[i] for i in shares[rank]]
        assert part.shard.pieces == [(p.file, p.row_group) for p in mine]
        # Its rows are exactly those of its pieces that have a label, and no piece was read by two ranks.
        labels = [read_pieces(dataset, [p], ["label"]).column("label") for p in mine]
        kept = sum(len(c) - c.null_count for c in labels)
        assert len(part.y) == len(part.x) == kept
    # Each piece was read twice (the survey, then the encoding) by one rank, and every piece was read.
    assert set(read.values()) == {2} and len(read) == len(dataset.pieces())
    indices = np.concatenate([p.shard.rows for p in parts if p.shard is not None])
    assert sorted(indices.tolist()) == list(range(parts[0].rows))


def test_one_two_three_ranks_agree_with_the_one_process_encoder(table: Path) -> None:
    whole = prepare(str(table), "label", "auto", "auto")
    for world in (1, 2, 3):
        parts = sharded(str(table), world)
        assert all(p.pre.to_dict() == whole.pre.to_dict() for p in parts)
        assert all(p.label == whole.label and p.metric == whole.metric for p in parts)
        index = np.concatenate([p.shard.rows for p in parts if p.shard is not None])
        order = np.argsort(index)
        np.testing.assert_array_equal(np.concatenate([p.x.numeric for p in parts])[order], whole.x.numeric)
        np.testing.assert_array_equal(np.concatenate([p.x.categorical for p in parts])[order], whole.x.categorical)
        np.testing.assert_array_equal(np.concatenate([p.y for p in parts])[order], whole.y)
        # Rank 0 holds every row's label, placed by row index: the leaderboard scores against it.
        assert parts[0].shard is not None and parts[0].shard.y_all is not None
        np.testing.assert_array_equal(parts[0].shard.y_all, whole.y)
        assert all(p.shard is not None and p.shard.y_all is None for p in parts[1:])


def test_a_rows_fold_is_the_same_for_one_two_and_three_ranks(table: Path) -> None:
    folds: dict[int, dict[int, int]] = {}
    for world in (1, 2, 3):
        parts = sharded(str(table), world)
        folds[world] = {}
        for p in parts:
            assert p.shard is not None
            for index, fold in zip(p.shard.rows, rows.fold_of(p.shard.keys, 0, 5), strict=True):
                folds[world][int(index)] = int(fold)
    assert folds[1] == folds[2] == folds[3]
    sizes = np.bincount(list(folds[1].values()), minlength=5)
    assert sizes.min() > 0.8 * len(folds[1]) / 5  # a hash: about a fifth each


def test_the_test_table_is_sharded_too_and_its_labels_reach_rank_zero(table: Path, tmp_path: Path) -> None:
    test = write_dataset(mixed_frame(900, seed=5), tmp_path / "test", files=3, row_group_rows=300)
    whole = prepare(str(table), "label", "auto", "auto", str(test))
    parts = sharded(str(table), 3, str(test))
    assert sum(len(p.x_test) for p in parts if p.x_test is not None) == len(
        whole.y_test if whole.y_test is not None else []
    )
    index = np.concatenate([p.shard.test_rows for p in parts if p.shard is not None and p.shard.test_rows is not None])
    order = np.argsort(index)
    np.testing.assert_array_equal(np.concatenate([p.x_test.numeric for p in parts if p.x_test is not None])[order],
                                  whole.x_test.numeric if whole.x_test is not None else None)  # fmt: skip
    assert parts[0].shard is not None and parts[0].shard.y_test_all is not None
    np.testing.assert_array_equal(parts[0].shard.y_test_all, whole.y_test)


def test_bad_data_on_one_shard_fails_every_rank_with_the_same_line(tmp_path: Path) -> None:
    frame = mixed_frame(1200, seed=6)
    frame.loc[1100, "x1"] = np.inf  # in the last file: one rank's shard
    root = write_dataset(frame, tmp_path / "bad", files=3, row_group_rows=400)
    errors: list[str] = []
    dataset = open_dataset(str(root))

    def one(member: Any) -> None:
        try:
            prepare_sharded(dataset, "label", "auto", "auto", None, member)
        except DataError as exc:
            errors.append(str(exc))

    ThreadGroup(3).run(one)
    assert len(errors) == 3 and len(set(errors)) == 1
    assert "part-00002.parquet: column 'x1' holds 1 infinite value(s)" in errors[0]


def test_a_label_missing_from_the_table_is_refused_on_every_rank(table: Path) -> None:
    dataset = open_dataset(str(table))
    with pytest.raises(DataError, match="label column 'nope' not found"):
        ThreadGroup(2).run(lambda m: prepare_sharded(dataset, "nope", "auto", "auto", None, m))


def test_reads_straight_from_a_bucket(s3_bucket: str, table: Path) -> None:
    import pyarrow.fs as pafs

    from tabjob_trainer.storage.filesystems import filesystem

    fs, root = filesystem(f"s3://{s3_bucket}/train/")
    pafs.copy_files(str(table), root, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    local = prepare(str(table), "label", "auto", "auto")
    parts = sharded(f"s3://{s3_bucket}/train/", 2)
    assert [len(p.y) for p in parts] != [len(local.y)] and sum(len(p.y) for p in parts) == len(local.y)
    assert parts[0].shard is not None and parts[0].shard.y_all is not None
    np.testing.assert_array_equal(parts[0].shard.y_all, local.y)


# ------------------------------------------------------------------------------------------- pure parts


@given(st.integers(0, 2**31), st.integers(0, 50), st.integers(1, 3000), st.integers(2, 10), st.integers(0, 20))
@settings(max_examples=100, deadline=None)
def test_folds_depend_on_the_row_and_bag_set_only(file: int, group: int, n: int, k: int, bag: int) -> None:
    keys = rows.row_keys(file, group, n)
    np.testing.assert_array_equal(rows.row_keys(file, group, n - n // 2, start=n // 2), keys[n // 2 :])
    folds = rows.fold_of(keys, bag, k)
    assert folds.min() >= 0 and folds.max() < k
    np.testing.assert_array_equal(rows.fold_of(keys[::-1], bag, k), folds[::-1])  # per row, not per position
    train, val = rows.split(keys, k, bag, 0)
    assert sorted(np.concatenate([train, val]).tolist()) == list(range(n))


def test_folds_differ_between_bag_sets_and_the_holdout_is_a_fifth() -> None:
    keys = rows.row_keys(0, 0, 100_000)
    assert (rows.fold_of(keys, 0, 5) != rows.fold_of(keys, 1, 5)).mean() > 0.7
    assert abs(rows.in_holdout(keys).mean() - 0.2) < 0.01


@given(st.lists(st.lists(st.sampled_from("abcdefg"), max_size=40), min_size=1, max_size=5))
@settings(max_examples=100, deadline=None)
def test_merged_category_counts_are_the_whole_tables_in_any_order(shards: list[list[str]]) -> None:
    parts = [Counter(s) for s in shards]
    whole = Counter([v for s in shards for v in s])
    assert summaries.merge_counts(parts) == whole == summaries.merge_counts(parts[::-1])
    assert summaries.top(summaries.merge_counts(parts), 3) == summaries.top(whole, 3)


@given(
    st.lists(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=300), min_size=1, max_size=4),
)
@settings(max_examples=60, deadline=None)
def test_merged_quantiles_are_within_the_sketch_error(shards: list[list[float]]) -> None:
    values = np.concatenate([np.asarray(s) for s in shards]) if any(shards) else np.empty(0)
    if values.size == 0:
        return
    sketches = [summaries.sketch(np.asarray(s, dtype=np.float64).reshape(-1, 1), points=101) for s in shards]
    refs = np.linspace(0, 1, 11)
    merged = summaries.merged_quantiles(sketches, 0, refs)
    # Each merged quantile is a quantile of the whole column at its level, within the shards' rank error (1/100
    # each, doubled for the merge) and a row per shard (each shard interpolates between its values, as numpy does).
    ordered = np.sort(values)
    below = np.searchsorted(ordered, merged, side="left") / values.size
    at_most = np.searchsorted(ordered, merged, side="right") / values.size
    slack = 0.02 + len(shards) / values.size + 1e-9
    assert np.all((below <= refs + slack) & (at_most >= refs - slack)), (merged, below, at_most)


def test_label_summaries_infer_the_problem_as_the_whole_column() -> None:
    def summary(values: list[Any], numeric: bool) -> summaries.LabelSummary:
        s = summaries.LabelSummary(numeric=numeric)
        s.add(sorted(set(values), key=str), all(float(v).is_integer() for v in values) if numeric else True)
        s.count = len(values)
        return s

    halves = [summary([1, 2, 3] * 10, True), summary([3, 4] * 10, True)]
    info = summaries.label_info(summaries.merge_labels(halves), "auto", "t", "y")
    assert info.problem_type == "multiclass" and info.classes == [1, 2, 3, 4]
    assert (
        summaries.label_info(summaries.merge_labels([summary([0.5, 1.5], True)] * 3), "auto", "t", "y").problem_type
        == "binary"
    )
    text = [summary(["a"], False), summary(["b", "c"], False)]
    assert summaries.label_info(summaries.merge_labels(text), "auto", "t", "y").classes == ["a", "b", "c"]
    with pytest.raises(DataError, match="single class"):
        summaries.label_info(summaries.merge_labels([summary(["a"], False)] * 2), "auto", "t", "y")


def test_encoder_reads_arrow_types_as_the_one_process_reader(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "when": pd.to_datetime(["2024-01-01", None, "2024-03-01", "2024-04-01"]),
            "code": pd.Categorical(["a", "b", None, "a"]),
            "n": [1, 2, 3, 4],
            "label": ["x", "y", "x", "y"],
        }
    )
    root = write_dataset(pd.concat([frame] * 5, ignore_index=True), tmp_path / "types", files=2, row_group_rows=5)
    whole = prepare(str(root), "label", "auto", "auto")
    parts = sharded(str(root), 2)
    assert parts[0].pre.to_dict() == whole.pre.to_dict()
    index = np.concatenate([p.shard.rows for p in parts if p.shard is not None])
    np.testing.assert_array_equal(np.concatenate([p.x.numeric for p in parts])[np.argsort(index)], whole.x.numeric)
