"""The torchrun agents' rendezvous store outlasts a control-plane outage.

Found by the chaos run tests/chaos/test_apiserver_restart.py: every rank names the c10d store by the headless
Service's DNS record, which CoreDNS serves from the API server; pods that started while kube-apiserver was down
(a 70 s graceful restart) could not resolve it within torch's default store timeout (read_timeout, 60 s), torchrun
exited 1, and the operator took that for the trainer's own verdict: three jobs that succeed without the restart
ended Failed/NonZeroExit. The store connection retries an unresolved name until read_timeout, so the agents now
wait as long as they already wait for their peers (torchrun's join_timeout, 600 s).

An outage longer than that still ends torchrun with exit 1. The pod's launcher (tabjob_trainer.launch) tells that
apart from the trainer's verdict: torchrun gave up before any trainer process started, and the termination
message says so as a LauncherExit, which the operator retries. tests/trainer/test_launch.py runs it under real
torchrun with an unreachable rendezvous.
"""

from __future__ import annotations

from typing import Any

import pytest

from tabjob.contracts.results import LauncherExit, RunSummary
from tabjob.controller.policy.pods import failure
from tests.unit.test_builders import container, manifest, render

JOIN_TIMEOUT = 600  # torchrun's default wait for every peer to join; the store should wait no less


def _rdzv_conf(args: list[str]) -> dict[str, str]:
    conf = next(a.removeprefix("--rdzv-conf=") for a in args if a.startswith("--rdzv-conf="))
    return dict(kv.split("=", 1) for kv in conf.split(","))


def test_every_rank_waits_for_its_rendezvous_store_as_long_as_for_its_peers() -> None:
    pods, _, _ = render(manifest())
    for index, pod in enumerate(pods):
        conf = _rdzv_conf(container(pod)["args"])
        assert conf["is_host"] == str(int(index == 0))
        assert int(conf.get("read_timeout", "60")) >= JOIN_TIMEOUT, conf


def _exited(code: int, message: str) -> dict[str, Any]:
    """A trainer pod as the kubelet reports it after its container exited."""
    terminated = {"exitCode": code, "reason": "Error", "message": message, "finishedAt": "2026-01-01T00:00:00Z"}
    return {
        "metadata": {"name": "adult-1", "labels": {"tabjob.dev/rank": "1", "tabjob.dev/attempt": "0"}},
        "status": {"phase": "Failed", "containerStatuses": [{"name": "trainer", "state": {"terminated": terminated}}]},
    }


def test_every_pod_runs_torchrun_under_the_launcher() -> None:
    pods, _, _ = render(manifest())
    for pod in pods:
        assert container(pod)["command"] == ["python", "-m", "tabjob_trainer.launch", "torchrun"]


def test_torchrun_giving_up_before_the_trainer_started_is_retried() -> None:
    tail = "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"
    f = failure(_exited(1, LauncherExit(exit_code=1, log_tail=tail).for_termination()))
    assert f is not None and f.retryable, f
    assert f.reason == "LauncherExit"
    assert "node rank 1" in f.message and "code 1" in f.message and tail in f.message


@pytest.mark.parametrize(
    "message",
    [
        "Traceback (most recent call last):\nValueError: a bug in the trainer",  # a crashed trainer's log tail
        RunSummary(error="data.train: file not found").for_termination(),  # the trainer's verdict
        '{"exitCode": 1, "bestModel": "GBM"}',  # not a LauncherExit: one spelling, nothing extra
    ],
)
def test_the_trainers_own_exit_stays_final(message: str) -> None:
    f = failure(_exited(1, message))
    assert f is not None and not f.retryable and f.reason == "NonZeroExit", f
