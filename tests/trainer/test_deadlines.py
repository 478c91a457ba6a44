"""The deadlines of a round's share of a time limit and of its folds' shares (tabjob_trainer/deadlines.py), and what
they do in a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tabjob.api import parse_manifest
from tabjob.planner import plan_job
from tabjob.planner.rounds import rounds
from tabjob_trainer.deadlines import fold_deadline, folds_left, fraction_deadline, share_deadline
from tabjob_trainer.scheduler import slots_of
from tests.trainer.helpers import leaderboard, manifest, mixed_table, records, tabjob, write_manifest


@pytest.mark.parametrize(
    ("now", "deadline", "parts", "expected"),
    [
        (100.0, 160.0, 4, 115.0),  # a quarter of the minute left
        (100.0, 160.0, 1, 160.0),  # one part: all of it
        (100.0, 160.0, None, 160.0),  # no share
        (100.0, None, 4, None),  # no deadline, no share
        (170.0, 160.0, 3, 170.0),  # past the deadline: nothing left, never a deadline in the past's past
    ],
)
def test_share_deadline(now: float, deadline: float | None, parts: int | None, expected: float | None) -> None:
    assert share_deadline(now, deadline, parts) == expected


@pytest.mark.parametrize(
    ("now", "deadline", "fraction", "expected"),
    [
        (100.0, 160.0, 0.25, 115.0),  # a round of two of eight parts
        (100.0, 160.0, 1.0, 160.0),
        (100.0, 160.0, None, 160.0),  # a round with the last family's first config: all of it
        (100.0, None, 0.5, None),
        (170.0, 160.0, 0.5, 170.0),  # past the deadline: nothing left
    ],
)
def test_fraction_deadline(now: float, deadline: float | None, fraction: float | None, expected: float | None) -> None:
    assert fraction_deadline(now, deadline, fraction) == expected


def test_each_rank_runs_its_slot_of_a_round_in_plan_order() -> None:
    doc = manifest("/data/train.csv", "label", {}, preset="best", bagging={"folds": 3}, timeLimitSeconds=300)
    del doc["spec"]["models"]
    plan = plan_job(parse_manifest(doc))
    first = rounds(plan.configs)[0]
    ids = {rank: [f.id for fits in slots_of(plan, rank, first).values() for f in fits] for rank in (0, 1)}
    # The floor's folds 0 and 2 and LightGBM's fold 1 on rank 0; the others on rank 1: three fits each.
    assert ids == {
        0: ["GBM_Plain.t0.s0.f0", "GBM_Plain.t0.s0.f2", "GBM.t0.s0.f1"],
        1: ["GBM_Plain.t0.s0.f1", "GBM.t0.s0.f0", "GBM.t0.s0.f2"],
    }


@pytest.mark.parametrize(
    ("now", "shared", "parts", "floor", "limit", "expected"),
    [
        (100.0, 160.0, 2, 30.0, 200.0, 130.0),  # on time: half of the minute left, which is the floor
        (135.0, 160.0, 1, 30.0, 200.0, 165.0),  # the first fold ran 5 s past its share: the second still gets 30 s
        (165.0, 160.0, 1, 30.0, 200.0, 195.0),  # started past the config's share: 30 s, not nothing (one round)
        (165.0, 160.0, 1, 30.0, 180.0, 180.0),  # ... but never past the base models' deadline
        (100.0, 160.0, 1, 30.0, 200.0, 160.0),  # more than the floor left: all of it
        (135.0, 160.0, 1, None, 200.0, 160.0),  # no floor: what is left
        (100.0, None, 2, None, None, None),  # no time limit
    ],
)
def test_fold_deadline_never_leaves_a_fold_less_than_its_even_share(
    now: float, shared: float | None, parts: int, floor: float | None, limit: float | None, expected: float | None
) -> None:
    assert fold_deadline(now, shared, parts, floor, limit) == expected


@pytest.mark.parametrize(
    ("reused", "expected"),
    [
        (set(), {"f0": 3, "f1": 2, "f2": 1}),  # a fresh run: the slot's three folds split its time
        ({"f0"}, {"f1": 2, "f2": 1}),  # resumed with its first fold stored: two folds split all of the time
        ({"f0", "f2"}, {"f1": 1}),  # one fold left to train: all of it
        ({"f0", "f1", "f2"}, {}),  # nothing to train
    ],
)
def test_folds_a_resumed_run_reuses_take_no_share(reused: set[str], expected: dict[str, int]) -> None:
    assert folds_left(["f0", "f1", "f2"], reused) == expected


@pytest.mark.slow
def test_a_config_that_would_run_to_the_deadline_leaves_the_next_family_its_turn(tmp_path: Path) -> None:
    """Without the share the endless CatBoost (first) would use the whole 30 s and the network after it never start.
    The network's 8 small epochs take about a second alone; its half of the limit leaves room for a loaded machine
    (at 16 s, with the CPUs shared by two other jobs, they once ran past the deadline)."""
    mixed_table(600, seed=1).to_csv(tmp_path / "train.csv", index=False)
    endless = {"iterations": 10_000_000, "early_stopping_rounds": 0, "learning_rate": 1e-6}
    small = {"num_epochs": 8, "patience": 3, "hidden_size": 32}
    doc = manifest(
        str(tmp_path / "train.csv"),
        "label",
        {"CAT": [{"hyperparameters": endless}], "NN_TORCH": [{"hyperparameters": small}]},
        bagging={"folds": 2},
        timeLimitSeconds=30,
    )
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    rows = {r["model"]: r for r in leaderboard(out)}
    assert rows["CAT"]["state"] == "Succeeded" and rows["NN_TORCH"]["state"] == "Succeeded", rows
    # Two slots, one fold each: the trees' folds stopped at about half of the time left, not at the deadline.
    trees = [r for fit_id, r in records(out).items() if r.key == "CAT"]
    assert len(trees) == 2 and all(r.fit_time < 22 for r in trees), [(r.id, r.fit_time) for r in trees]
    # The row says what stopped them; the network, which ended by its own epochs, says nothing of the kind.
    assert "stopped by its share of the time limit" in str(rows["CAT"]["note"]), rows["CAT"]
    assert "stopped by" not in str(rows["NN_TORCH"]["note"]), rows["NN_TORCH"]


@pytest.mark.slow
def test_a_slot_s_folds_split_their_config_s_time_so_the_bag_is_whole(tmp_path: Path) -> None:
    """3 folds on 2 slots: one slot runs two folds in a row. Had its first run to the deadline, the second would be
    skipped and the bag, missing a third of its out-of-fold rows, dropped."""
    mixed_table(600, seed=1).to_csv(tmp_path / "train.csv", index=False)
    endless = {"iterations": 10_000_000, "early_stopping_rounds": 0, "learning_rate": 1e-6}
    doc = manifest(
        str(tmp_path / "train.csv"),
        "label",
        {"CAT": [{"hyperparameters": endless}]},
        bagging={"folds": 3},
        timeLimitSeconds=12,
    )
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    folds = [r for r in records(out).values() if r.key == "CAT"]
    assert len(folds) == 3 and all(r.state == "Succeeded" for r in folds), [(r.id, r.state, r.message) for r in folds]
    row = {r["model"]: r for r in leaderboard(out)}["CAT"]
    assert row["state"] == "Succeeded", row
    # The slot's first fold stopped at its share, its last (and the other slot's one) at the job's time limit.
    assert sorted(str(r.note) for r in folds) == [
        "stopped by its share of the time limit",
        "stopped by the time limit",
        "stopped by the time limit",
    ], [(r.id, r.note) for r in folds]


@pytest.mark.slow
def test_two_configs_of_three_folds_share_the_two_slots_evenly(tmp_path: Path) -> None:
    """3 folds on 2 slots, two configs: one round (tabjob.planner.rounds), three fits on each rank, each with a third
    of the time. Config by config, the rank holding one fold gave it half the time and waited through the other
    rank's second fold, and the rank holding two gave each a quarter."""
    mixed_table(600, seed=1).to_csv(tmp_path / "train.csv", index=False)
    cat = {"iterations": 10_000_000, "early_stopping_rounds": 0, "learning_rate": 1e-6}
    net = {"num_epochs": 1_000_000, "patience": 1_000_000, "hidden_size": 32}
    doc = manifest(
        str(tmp_path / "train.csv"),
        "label",
        {"CAT": [{"hyperparameters": cat}], "NN_TORCH": [{"hyperparameters": net}]},
        bagging={"folds": 3},
        timeLimitSeconds=24,
    )
    out = tmp_path / "run"
    result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    folds = sorted(records(out).values(), key=lambda r: r.id)
    assert len(folds) == 6 and all(r.state == "Succeeded" for r in folds), [(r.id, r.state, r.message) for r in folds]
    assert sorted(r.rank for r in folds) == [0, 0, 0, 1, 1, 1], [(r.id, r.rank) for r in folds]
    times = [r.fit_time for r in folds]
    # Even shares: no fold had twice another's time (config by config: a half against a quarter).
    assert max(times) < 1.6 * min(times), [(r.id, r.rank, round(r.fit_time, 1)) for r in folds]
