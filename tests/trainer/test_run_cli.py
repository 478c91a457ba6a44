"""`tabjob run`'s choices before any process starts: GPUs to hand to the ranks, and the launch command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tabjob.api import parse_manifest
from tabjob.cli.devices import DeviceError
from tabjob.cli.run import RunError, _environment, torchrun_command
from tabjob.contracts.plan import Plan
from tabjob.planner import plan_job
from tests.trainer.helpers import manifest


def _plan(gpus: float, fallback: bool = False) -> Plan:
    resources: dict[str, object] = {"cpus": 4, "gpus": gpus}
    doc = manifest(
        "x.csv",
        "y",
        {"NN_TORCH": [{"resources": {"cpus": 2, "gpus": 1}}]} if gpus else {"GBM": [{}]},
        resources=resources,
        bagging={"folds": 2} if gpus else {"folds": 0},
    )
    if fallback:
        doc["spec"]["onGpuUnavailable"] = "FallbackToCPU"
    return plan_job(parse_manifest(doc))


def test_devices_map_through_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    plan = _plan(gpus=2)
    assert sum(p.gpus for p in plan.pods) == 2
    assert _environment(plan, None)["CUDA_VISIBLE_DEVICES"] == "4,5"
    assert _environment(plan, "1, 2")["CUDA_VISIBLE_DEVICES"] == "5,6"
    assert _environment(plan, "-1")["CUDA_VISIBLE_DEVICES"] == "4,5"
    with pytest.raises(RunError, match="selects 1 GPU"):
        _environment(plan, "2,")
    with pytest.raises(DeviceError):
        _environment(plan, "0")


def test_no_gpu_is_one_clear_error_unless_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RunError, match=r"needs 2 GPU.*FallbackToCPU"):
        _environment(_plan(gpus=2), None)
    env = _environment(_plan(gpus=2, fallback=True), None)
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    with pytest.raises(RunError, match="uses no GPU"):
        _environment(_plan(gpus=0), "1")


def test_launch_command_is_torchrun_for_a_group_and_direct_for_one_rank() -> None:
    out = Path("/tmp/run")
    doc = manifest("x.csv", "y", {"GBM": [{"resources": {"cpus": 1}}]}, resources={"cpus": 2}, bagging={"folds": 2})
    group = torchrun_command(out, plan_job(parse_manifest(doc)))
    assert group[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    assert group[5:7] == ["-m", "tabjob_trainer"]
    single = torchrun_command(out, _plan(gpus=0))
    assert single[1:3] == ["-m", "tabjob_trainer"] and "torch.distributed.run" not in single


def test_devices_auto_is_the_default_on_a_gpu_less_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    # `--devices auto` is the documented default: spelling it out must behave as leaving it out.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    fallback = _plan(gpus=2, fallback=True)
    for given in ("auto", "-1", None):
        assert _environment(fallback, given)["CUDA_VISIBLE_DEVICES"] == ""
        assert "CUDA_VISIBLE_DEVICES" in _environment(_plan(gpus=0), given)
    with pytest.raises(RunError, match=r"needs 2 GPU.*FallbackToCPU"):
        _environment(_plan(gpus=2), "auto")
    with pytest.raises(DeviceError):
        _environment(fallback, "0,1")  # named GPUs that are not there stay an error
