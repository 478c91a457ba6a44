"""Sharded reading and the memory check on the control side: the shard assignment, the reading mode, the estimate,
the refusal with both numbers and the smallest processes that fits. `tabjob validate` reading a real table's
footers is tests/trainer/test_validate_footers.py (it writes Parquet with numpy)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabjob.api import parse_manifest
from tabjob.api.errors import SpecError
from tabjob.families import FAMILIES
from tabjob.planner import DataStats, plan_job
from tabjob.planner.memory import (
    LEADER_BYTES_PER_ROW,
    LEADER_BYTES_PER_ROW_PER_MODEL,
    MIB,
    POD_BASE_BYTES,
    RANK_BASE_BYTES,
    TORCH_BYTES,
    estimate,
    over,
)
from tabjob.planner.sharding import assign, reading_plan

weights = st.lists(st.integers(min_value=0, max_value=10**7), min_size=0, max_size=60)


@given(weights, st.integers(min_value=1, max_value=12))
@settings(max_examples=300, deadline=None)
def test_every_piece_goes_to_exactly_one_rank_in_dataset_order(w: list[int], ranks: int) -> None:
    shards = assign(w, ranks)
    assert len(shards) == ranks
    flat = [i for s in shards for i in s]
    assert sorted(flat) == [i for i, x in enumerate(w) if x > 0]  # each non-empty piece once, empty ones nowhere
    assert all(s == sorted(s) for s in shards)
    assert shards == assign(list(w), ranks)  # pure: the same on every rank


@given(weights, st.integers(min_value=1, max_value=12))
@settings(max_examples=300, deadline=None)
def test_loads_are_balanced_within_the_heaviest_piece(w: list[int], ranks: int) -> None:
    loads = [sum(w[i] for i in s) for s in assign(w, ranks)]
    assert max(loads) - min(loads) <= max(w, default=0)
    if sum(1 for x in w if x > 0) >= ranks:
        assert all(load > 0 for load in loads)  # enough pieces: no rank is left without rows


def test_equal_row_groups_split_evenly() -> None:
    assert assign([100] * 6, 3) == [[0, 3], [1, 4], [2, 5]]
    assert [sum([5, 1, 1, 1, 1, 1][i] for i in s) for s in assign([5, 1, 1, 1, 1, 1], 2)] == [5, 5]


def job(models: dict[str, Any], **spec: Any) -> Any:
    body: dict[str, Any] = {
        "data": {"train": "s3://bucket/table/", "label": "y"},
        "resources": {"cpus": 3, "cpusPerPod": 1},
        "models": models,
        **spec,
    }
    return parse_manifest({"apiVersion": "tabjob.dev/v1alpha1", "kind": "TabularJob", "metadata": {"name": "big"},
                           "spec": body})  # fmt: skip


THREE = {"processes": 3, "resources": {"cpus": 3}}
STATS = DataStats("parquet", columns=31, pieces=(100_000,) * 12, rows=1_200_000, stored_bytes=280 * MIB,
                  uncompressed_bytes=290 * MIB)  # fmt: skip


def test_gbm_and_xgb_over_every_rank_read_sharded() -> None:
    plan = plan_job(job({"GBM": [THREE], "XGB": [THREE]}), STATS)
    assert plan.world_size == 3 and plan.reading.mode == "sharded" and plan.reading.reason == ""
    assert plan.memory is not None and len(plan.memory.pod_bytes) == 3
    # Each pod holds a third of the table: beyond the interpreter and libraries, under half a whole-table pod's (its
    # third at the sharded factor, which is higher per byte than reading whole). Pod 1: rank 0's pod also holds the
    # labels and out-of-fold predictions of every row either way.
    whole = plan_job(job({"GBM": [{}], "XGB": [{}]}, bagging={"folds": 3}), STATS)
    assert whole.reading.mode == "whole" and "GBM trains in 1 process(es)" in whole.reading.reason
    assert whole.memory is not None
    base = POD_BASE_BYTES + RANK_BASE_BYTES + TORCH_BYTES
    assert plan.memory.pod_bytes[1] - base < 0.5 * (whole.memory.pod_bytes[1] - base)
    assert plan.memory.pod_bytes[0] > plan.memory.pod_bytes[1]


@pytest.mark.parametrize(
    ("models", "spec", "stats", "why"),
    [
        ({"GBM": [THREE], "CAT": [{"resources": {"cpus": 1}}]}, {}, None, "CAT trains in 1 process(es)"),
        ({"GBM": [THREE]}, {"stacking": {"levels": 1}, "bagging": {"folds": 3}}, None, "stack layer"),
        ({"GBM": [THREE]}, {"refitFull": True, "bagging": {"folds": 3}}, None, "refit on every row"),
        ({"GBM": [THREE]}, {}, DataStats("parquet", 5, (10, 0), 10, 100, 100), "1 row group(s) in all its files"),
        ({"GBM": [THREE]}, {}, DataStats("csv", 5, (100, 100), None, 200, None), "2 file(s), too coarse"),
    ],
)
def test_what_reads_the_whole_table_says_why(
    models: dict[str, Any], spec: dict[str, Any], stats: DataStats | None, why: str
) -> None:
    plan = plan_job(job(models, **spec), stats)
    assert plan.reading.mode == "whole" and why in plan.reading.reason
    assert any("do not shard the table" in w and why in w for w in plan.warnings)


def test_a_family_that_cannot_shard_says_so() -> None:
    # No family that trains data-parallel today lacks shards; the rule still names one that would.
    assert {k for k, f in FAMILIES.items() if f.shards} == {"GBM", "XGB", "NN_TORCH", "TABM"}
    assert not FAMILIES["CAT"].shards and not FAMILIES["CAT"].data_parallel
    fits = plan_job(job({"GBM": [THREE]})).fits
    cat = [f.model_copy(update={"key": "CAT", "model": "C"}) for f in fits]
    assert "C (CatBoost) cannot train on shards" in reading_plan(cat, 3, None).reason


def test_a_plan_whose_pod_cannot_hold_the_table_is_refused_with_both_numbers_and_the_processes_that_fit() -> None:
    one = job({"GBM": [{}], "XGB": [{}]}, bagging={"folds": 3}, resources={"cpus": 3, "cpusPerPod": 1, "memory": "4Gi"})
    with pytest.raises(SpecError) as refused:
        plan_job(one, STATS)
    (field, message), *_ = refused.value.problems
    assert field == "spec.resources.memory"
    assert "1,200,000 rows x 31 columns" in message and "above its memory limit of 1,365 MiB" in message
    fitting = int(re.search(r"processes: (\d+) on every model config would fit", message).group(1))  # type: ignore[union-attr]
    assert 2 <= fitting <= 3 and "raise spec.resources.memory to at least" in message
    # The advice is right: the same job with that many processes fits, and with one fewer it does not.
    sharded = {"processes": fitting, "resources": {"cpus": fitting}}
    resources = {"cpus": 3, "cpusPerPod": 1, "memory": "4Gi"}
    plan = plan_job(job({"GBM": [sharded], "XGB": [sharded]}, bagging={"folds": 3}, resources=resources), STATS)
    assert plan.reading.mode == "sharded" and plan.memory is not None and over(plan.memory) is None
    # Without the table's metadata (the operator cannot read the data) nothing is checked.
    assert plan_job(one).memory is None


def test_a_table_no_processes_can_split_asks_for_memory() -> None:
    tiny = job({"CAT": [{}]}, resources={"cpus": 1, "memory": "512Mi"})
    with pytest.raises(SpecError) as refused:
        plan_job(tiny, STATS)
    message = refused.value.problems[0][1]
    assert "processes:" not in message and "raise spec.resources.memory to at least" in message


def test_a_pod_without_a_memory_limit_is_never_refused() -> None:
    plan = plan_job(job({"GBM": [{}]}, bagging={"folds": 3}), STATS)
    assert plan.memory is not None and plan.memory.pod_limits == [None, None, None] and over(plan.memory) is None


def test_the_estimate_grows_with_the_share_each_rank_reads() -> None:
    plan = plan_job(job({"GBM": [THREE]}, resources={"cpus": 3, "cpusPerPod": 1, "memory": "30Gi"}), STATS)
    small = estimate(plan, STATS)
    doubled = DataStats("parquet", 31, STATS.pieces * 2, 2 * 1_200_000, 2 * STATS.stored_bytes, None)
    large = estimate(plan, doubled)
    grew = [b - a for a, b in zip(small.pod_bytes, large.pod_bytes, strict=True)]
    per_byte = FAMILIES["GBM"].sharded_memory_per_byte
    leader = (LEADER_BYTES_PER_ROW + LEADER_BYTES_PER_ROW_PER_MODEL) * 1_200_000  # rank 0's added rows, one model
    assert all(abs(g - per_byte * small.table_bytes / 3) < 0.05 * g + leader for g in grew)
    assert grew[0] > grew[1]
