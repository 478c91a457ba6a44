"""The reconciler against an API server that refuses, fails and stalls: the real client, the real reconciler,
HTTP to an in-process fake (fake_apiserver.py). One test per defect of the operator's failure paths."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tabjob.controller.config import Settings
from tabjob.controller.policy.decision import ChildFailure, Decision, Observed
from tabjob.controller.runtime import reconciler
from tabjob.controller.runtime.progress import ProgressProbe
from tabjob.controller.runtime.reconciler import Reconciler
from tabjob.controller.runtime.workqueue import Key
from tests.unit.fake_apiserver import FakeApiServer, Fault

SETTINGS = Settings(default_image="trainer:test", retry_base_delay=1.0, progress_interval=1.0)
JOBS = "tabularjobs"


def job(name: str = "qs", uid: str = "uid-1", status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "generation": 1},
        "spec": {
            "data": {"train": "sklearn://breast_cancer", "label": "target"},
            "output": {"path": "/output/qs"},
            "resources": {"cpus": 2, "cpusPerPod": 1},
            "models": {"GBM": [{}]},
            "bagging": {"folds": 2},
            **spec,
        },
    }
    if status:
        doc["status"] = status
    return doc


async def run_for(seconds: float, api: FakeApiServer, *docs: dict[str, Any]) -> Reconciler:
    """An operator whose watch saw `docs` (stored on the fake first), running for `seconds`."""
    r = Reconciler(SETTINGS, api.api_client())
    r.queue.start()
    for doc in docs:
        r.on_job("ADDED", api.put(JOBS, doc))
    await asyncio.sleep(seconds)
    await r.queue.stop()
    return r


def scenario(body: Callable[[FakeApiServer], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with FakeApiServer() as api:
            return await body(api)

    return asyncio.run(main())


def condition(doc: dict[str, Any] | None, ctype: str) -> dict[str, Any]:
    assert doc is not None
    return next(c for c in doc["status"]["conditions"] if c["type"] == ctype)


def test_a_refused_status_is_terminal_not_a_hot_loop() -> None:
    # 65 pods pass validation but status.plan.pods holds at most 64: the API server refuses every such status.
    async def body(api: FakeApiServer) -> None:
        too_many = "status.plan.pods: Too many: 65: must have at most 64 items"
        api.faults.append(Fault("PATCH", "/status$", 422, "Invalid", too_many, when=lambda b: "plan" in b["status"]))
        await run_for(1.5, api, job())
        stored = api.get(JOBS, "qs")
        failed = condition(stored, "Failed")
        assert failed["reason"] == "StatusRejected" and too_many in failed["message"]
        assert condition(stored, "Stalled")["status"] == "True"
        assert api.count("PATCH", "/status$") == 2  # the refused status, then the smallest one; never a loop
        assert api.count("POST", "/events$") >= 1

    scenario(body)


def test_the_operators_log_tells_what_its_events_say(caplog: pytest.LogCaptureFixture) -> None:
    """At INFO (kopf's per-watch-event lines are off) the log has a line for each event the operator posts, a
    warning's at WARNING: the events expire after an hour, the log is what a platform team keeps."""

    async def body(api: FakeApiServer) -> None:
        api.faults.append(Fault("POST", "/services$", 422, "Invalid", "metadata.name: Invalid value"))
        await run_for(1.5, api, job())

    with caplog.at_level(logging.INFO, logger="tabjob.operator"):
        scenario(body)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "tabjob.operator"]
    assert any(level == logging.WARNING and m.startswith("ns/qs: CreateRejected: ") for level, m in lines), lines


def test_even_the_smallest_status_refused_posts_one_event_and_stops() -> None:
    async def body(api: FakeApiServer) -> None:
        api.faults.append(Fault("PATCH", "/status$", 422, "Invalid", "no"))
        await run_for(1.5, api, job())
        assert api.count("PATCH", "/status$") == 2
        assert api.count("POST", "/events$") == 1

    scenario(body)


def test_an_invalid_child_fails_the_job_with_a_condition_and_an_event() -> None:
    async def body(api: FakeApiServer) -> None:
        message = (
            'Service "1qs" is invalid: metadata.name: Invalid value: "1qs": a DNS-1035 label must start with a letter'
        )
        api.faults.append(Fault("POST", "/services$", 422, "Invalid", message))
        await run_for(1.5, api, job())
        failed = condition(api.get(JOBS, "qs"), "Failed")
        assert failed["reason"] == "CreateRejected" and "DNS-1035" in failed["message"]
        assert api.count("POST", "/services$") == 1 and api.names("pods") == []
        assert api.count("POST", "/events$") >= 1

    scenario(body)


def test_a_configmap_too_large_fails_the_job() -> None:
    async def body(api: FakeApiServer) -> None:
        api.faults.append(Fault("POST", "/configmaps$", 413, "RequestEntityTooLarge", "request is too large"))
        await run_for(1.0, api, job())
        assert condition(api.get(JOBS, "qs"), "Failed")["reason"] == "CreateRejected"
        assert api.count("POST", "/configmaps$") == 1

    scenario(body)


def test_a_quota_refusal_is_stalled_and_retried_with_back_off() -> None:
    async def body(api: FakeApiServer) -> None:
        quota = 'pods "qs-0" is forbidden: exceeded quota: compute, requested: cpu=1, used: cpu=8, limited: cpu=8'
        api.faults.append(Fault("POST", "/pods$", 403, "Forbidden", quota))
        await run_for(2.0, api, job())
        stalled = condition(api.get(JOBS, "qs"), "Stalled")
        assert (stalled["status"], stalled["reason"]) == ("True", "CreateForbidden") and "quota" in stalled["message"]
        # Back-off from 0.5 s with jitter over 2 s: a handful of tries, not hundreds.
        assert 2 <= api.count("POST", "/pods$") <= 2 * 5

    scenario(body)


def test_each_pass_decides_once_and_sees_the_last_refusal_as_an_observation(monkeypatch: pytest.MonkeyPatch) -> None:
    # One-way passes: a refused create ends its pass; the next pass observes the refusal and decides on it.
    decided: list[ChildFailure | None] = []
    passes: list[Key] = []
    real_decide, real_reconcile = reconciler.decide, Reconciler.reconcile

    def spy_decide(obs: Observed) -> Decision:
        decided.append(obs.create_failure)
        return real_decide(obs)

    async def spy_reconcile(self: Reconciler, key: Key) -> None:
        passes.append(key)
        await real_reconcile(self, key)

    monkeypatch.setattr(reconciler, "decide", spy_decide)
    monkeypatch.setattr(Reconciler, "reconcile", spy_reconcile)

    async def body(api: FakeApiServer) -> None:
        api.faults.append(Fault("POST", "/pods$", 403, "Forbidden", "exceeded quota: compute", times=1))
        await run_for(1.5, api, job())
        assert len(decided) == len(passes) >= 3
        refused = [i for i, failure in enumerate(decided) if failure is not None]
        assert len(refused) == 1 and decided[refused[0]].what.startswith("Pod/")  # type: ignore[union-attr]
        assert api.count("POST", "/pods$") >= 2  # tried again after the refusal was on record
        assert api.names("pods") == ["qs-0", "qs-1"]

    scenario(body)


def test_a_server_error_is_retried_and_the_job_proceeds() -> None:
    async def body(api: FakeApiServer) -> None:
        api.faults.append(Fault("POST", "/pods$", 500, "InternalError", "etcdserver: leader changed", times=2))
        await run_for(3.0, api, job())
        assert api.names("pods") == ["qs-0", "qs-1"]
        assert api.get(JOBS, "qs")["status"]["phase"] == "Pending"  # type: ignore[index]

    scenario(body)


def test_a_failed_verdict_is_written_before_the_survivors_are_deleted() -> None:
    async def body(api: FakeApiServer) -> None:
        r0 = {"phase": "Running", "containerStatuses": [{"name": "trainer", "state": {"running": {}}}]}
        exit2 = {"terminated": {"exitCode": 2, "reason": "Error", "message": "bad data", "finishedAt": "t"}}
        r1 = {"phase": "Failed", "containerStatuses": [{"name": "trainer", "state": exit2}]}
        doc = job(status={"phase": "Running", "startTime": "2025-01-01T00:00:00Z"})
        for i, st in enumerate((r0, r1)):
            api.put("pods", trainer_pod(i, "uid-1", st))
        await run_for(1.0, api, doc)
        order = [
            (m, p) for m, p, _ in api.log if (m, p.rsplit("/", 1)[-1]) in (("PATCH", "status"), ("DELETE", "qs-0"))
        ]
        assert [m for m, _ in order] == ["PATCH", "DELETE"]
        assert api.get(JOBS, "qs")["status"]["phase"] == "Failed"  # type: ignore[index]

    scenario(body)


def trainer_pod(index: int, owner: str, status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"qs-{index}",
            "namespace": "ns",
            "labels": {"tabjob.dev/job-name": "qs", "tabjob.dev/rank": str(index), "tabjob.dev/attempt": "0"},
            "annotations": {"tabjob.dev/generation": "1"},
            "ownerReferences": [{"kind": "TabularJob", "name": "qs", "uid": owner, "controller": True}],
        },
        "spec": {"containers": [{"name": "trainer", "image": "trainer:test"}]},
        "status": status,
    }


def test_a_recreated_job_never_adopts_the_old_jobs_pods() -> None:
    async def body(api: FakeApiServer) -> None:
        api.put("pods", trainer_pod(0, "uid-OLD", {"phase": "Running"}))
        await run_for(1.0, api, job(uid="uid-NEW"))
        stalled = condition(api.get(JOBS, "qs"), "Stalled")
        assert (stalled["status"], stalled["reason"]) == ("True", "NameTaken") and "qs-0" in stalled["message"]
        owner = api.get("pods", "qs-0")["metadata"]["ownerReferences"][0]["uid"]  # type: ignore[index]
        assert owner == "uid-OLD"

    scenario(body)


def test_the_old_jobs_pods_in_the_cache_are_not_counted_as_ours() -> None:
    async def body(api: FakeApiServer) -> None:
        r = Reconciler(SETTINGS, api.api_client())
        r.queue.start()
        old = api.put("pods", trainer_pod(0, "uid-OLD", {"phase": "Running"}))
        r.on_child("Pod", "ADDED", old)
        r.on_job("ADDED", api.put(JOBS, job(uid="uid-NEW", status={"phase": "Running"})))
        await asyncio.sleep(1.0)
        await r.queue.stop()
        status = api.get(JOBS, "qs")["status"]  # type: ignore[index]
        assert status["phase"] == "Pending" and "restarts" not in status  # not read as its own running pod
        assert condition(api.get(JOBS, "qs"), "Stalled")["reason"] == "NameTaken"

    scenario(body)


async def _trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A trainer image that answers one byte every 0.2 s, forever."""
    try:
        await reader.read(1024)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
        while True:
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(0.2)
    except (ConnectionError, asyncio.CancelledError):
        writer.close()


async def _huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(1024)
    writer.write(b"HTTP/1.1 200 OK\r\n\r\n" + b'{"fitsTotal": 1, "bestModel": "' + b"x" * 2_000_000 + b'"}')
    await writer.drain()
    writer.close()


def test_trickling_progress_endpoints_never_starve_api_calls() -> None:
    async def body(api: FakeApiServer) -> None:
        server = await asyncio.start_server(_trickle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        r = Reconciler(SETTINGS, api.api_client())
        probe = ProgressProbe(deadline=1.0)
        reads = [asyncio.create_task(probe.read("127.0.0.1", port)) for _ in range(12)]
        api.put(JOBS, job())
        # Twelve slow trainers are being read; an API call still goes through at once.
        assert await asyncio.wait_for(r.kube.get_job("ns", "qs"), 5) is not None
        assert not all(t.done() for t in reads)
        assert await asyncio.wait_for(asyncio.gather(*reads), 10) == [None] * 12  # each cut off at its deadline
        server.close()

    scenario(body)


def test_an_oversized_progress_body_is_no_progress() -> None:
    async def body(_: FakeApiServer) -> None:
        server = await asyncio.start_server(_huge, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        assert await ProgressProbe(deadline=5.0).read("127.0.0.1", port) is None
        server.close()

    scenario(body)


def test_planning_runs_off_the_event_loop() -> None:
    async def body(api: FakeApiServer) -> None:
        r = Reconciler(SETTINGS, api.api_client())
        release = threading.Event()
        r.planner.submit(release.wait)  # the planning thread is busy with someone's huge plan
        r.queue.start()
        r.on_job("ADDED", api.put(JOBS, job()))
        ticks = 0
        for _ in range(20):  # the loop keeps running other work meanwhile
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks == 20 and api.names("pods") == []
        release.set()
        for _ in range(1500):  # a bound for a loaded machine, not a speed goal: it ends as soon as the pods exist
            if len(api.names("pods")) == 2:  # both: the pass creates them one request after the other
                break
            await asyncio.sleep(0.02)
        await r.queue.stop()
        assert api.names("pods") == ["qs-0", "qs-1"]

    scenario(body)


def test_a_stopped_queue_runs_no_timer_and_no_pass() -> None:
    async def body(api: FakeApiServer) -> None:
        r = Reconciler(SETTINGS, api.api_client())
        r.queue.start()
        r.on_job("ADDED", api.put(JOBS, job(status={"phase": "Running"})))
        await asyncio.sleep(0.5)
        await r.queue.stop()  # leadership lost: timers, progress reads and passes all stop
        seen = len(api.log)
        r.on_job("MODIFIED", api.get(JOBS, "qs"))  # type: ignore[arg-type]
        r.queue.after(("ns", "qs"), 0.05)
        await asyncio.sleep(1.2)
        assert len(api.log) == seen and not r.queue.timers

    scenario(body)


def test_api_connections_are_reused() -> None:
    """Every response is read to its end, so urllib3 pools its connection: an unread one (a create whose answer
    the reconciler does not need) used to cost a new connection, on a real API server a TLS handshake, per call."""

    async def body(api: FakeApiServer) -> None:
        r = await run_for(3.0, api, *(job(name=f"j{i}", uid=f"uid-{i}") for i in range(6)))
        assert len(api.names("pods")) == 12
        assert len(api.log) >= 6 * 6  # ConfigMap, Service, 2 pods, status, Event per job
        assert len(api.connections) <= r.kube.pool._max_workers

    scenario(body)
