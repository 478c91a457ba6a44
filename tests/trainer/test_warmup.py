"""torch's one-time start-up (tabjob_trainer/warmup.py) is paid before a network's first round starts its clock,
not out of the first fold's share: on a table of a few hundred rows that share was a second or two, and the first
NN_TORCH fold on each rank stopped after one epoch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tabjob.api import parse_manifest
from tabjob.contracts.plan import FitPlan, Plan
from tabjob.planner import plan_job
from tabjob_trainer import scheduler
from tabjob_trainer.scheduler import RankEnv, RankRunner, trains_networks
from tests.trainer.helpers import manifest

LOADED = "import sys; from tabjob_trainer.warmup import WarmUp; w = WarmUp(start={start}); w.wait(); "


def _loaded(start: bool, module: str) -> bool:
    code = LOADED.format(start=start) + f"print({module!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return out.stdout.strip() == "True"


@pytest.mark.parametrize(("start", "expected"), [(True, True), (False, False)])
def test_the_warm_up_loads_what_the_first_optimizer_would(start: bool, expected: bool) -> None:
    # torch._dynamo is the bulk of it, and an optimizer's first construction imports it; a job without networks
    # must not import torch for it at all.
    assert _loaded(start, "torch._dynamo") is expected
    assert _loaded(start, "torch") is expected


def _plan(models: dict[str, list[dict[str, object]]]) -> Plan:
    doc = manifest("/data/train.csv", "label", models, bagging={"folds": 2}, timeLimitSeconds=60)
    return plan_job(parse_manifest(doc))


def test_the_scheduler_waits_for_torch_before_the_first_round_with_a_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan({"GBM": [{}, {"name": "GBM_2", "hyperparameters": {"num_leaves": 8}}], "NN_TORCH": [{}]})
    events: list[str] = []

    def run_slot(self: RankRunner, fits: list[FitPlan], shared: float | None) -> list[object]:
        events.extend(f.model for f in fits)
        return []

    monkeypatch.setattr(RankRunner, "_run_slot", run_slot)
    monkeypatch.setattr(scheduler, "make_groups", lambda plan: {})
    env = RankEnv(rank=0, world=plan.world_size, out=tmp_path, deadline=None, gpu_count=0, data_id="d")
    runner = RankRunner(env, plan, data=None, progress=None, done={}, torch_ready=lambda: events.append("ready"))  # type: ignore[arg-type]
    runner.run(lambda new, order: None)
    first_network = events.index("NN_TORCH")
    # Once, after the trees (which it runs beside) and before the network.
    assert events.count("ready") == 1 and events.index("ready") == first_network - 1, events
    assert all(model.startswith("GBM") for model in events[: first_network - 1]), events


@pytest.mark.parametrize(
    ("models", "expected"),
    [({"NN_TORCH": [{}]}, True), ({"TABM": [{}]}, True), ({"GBM": [{}], "CAT": [{}]}, False)],
)
def test_only_a_rank_with_a_network_warms_torch(models: dict[str, list[dict[str, object]]], expected: bool) -> None:
    plan = _plan(models)
    assert all(trains_networks(plan, rank) is expected for rank in range(plan.world_size))
