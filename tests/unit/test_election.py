"""Lease-based leader election against the in-process API server: one leader, a clean handover, and a leader
that cannot renew stops all its work before anyone else starts."""

from __future__ import annotations

import asyncio

import pytest

from tabjob.controller.runtime.election import LeaderElector, LeaseConfig
from tests.unit.fake_apiserver import FakeApiServer, Fault

FAST = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.15}


class Candidate:
    def __init__(self, api: FakeApiServer, name: str, timeline: list[str]) -> None:
        self.name, self.timeline = name, timeline
        self.elector = LeaderElector(
            api.api_client(), LeaseConfig("tabjob", "ns", name, **FAST), self.started, self.stopped
        )
        self.task: asyncio.Task[None] | None = None

    def started(self) -> None:
        self.timeline.append(f"{self.name} starts")

    async def stopped(self) -> None:
        self.timeline.append(f"{self.name} stops")

    def run(self) -> None:
        self.task = asyncio.create_task(self.elector.run())

    async def cancel(self) -> None:
        assert self.task is not None
        self.task.cancel()
        done, _ = await asyncio.wait([self.task], timeout=10)
        assert done, f"{self.name}'s elector did not stop within 10 s of its cancel"


async def until(check: object, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if callable(check) and check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


def test_one_leader_and_a_clean_handover() -> None:
    async def body(api: FakeApiServer) -> list[str]:
        timeline: list[str] = []
        a, b = Candidate(api, "a", timeline), Candidate(api, "b", timeline)
        a.run()
        await until(lambda: a.elector.leading)
        b.run()
        await asyncio.sleep(1.5)  # longer than the lease: a keeps renewing, b never gets it
        assert not b.elector.leading
        await a.cancel()  # a clean shutdown releases the Lease
        await until(lambda: b.elector.leading)
        await b.cancel()
        lease = api.get("leases", "tabjob")
        assert lease is not None and lease["spec"]["leaseTransitions"] == 1
        return timeline

    async def main() -> list[str]:
        async with FakeApiServer() as api:
            return await body(api)

    assert asyncio.run(main()) == ["a starts", "a stops", "b starts", "b stops"]


def test_a_leader_that_cannot_renew_stops_before_another_starts() -> None:
    async def body(api: FakeApiServer) -> list[str]:
        timeline: list[str] = []
        a, b = Candidate(api, "a", timeline), Candidate(api, "b", timeline)
        a.run()
        await until(lambda: a.elector.leading)
        b.run()
        # a is cut off from the API server (its renewals fail); b sees the Lease go stale and takes it.
        api.faults.append(Fault("PATCH", "/leases/", 503, when=lambda doc: doc["spec"]["holderIdentity"] == "a"))
        await until(lambda: b.elector.leading)
        await b.cancel()
        await a.cancel()
        return timeline

    async def main() -> list[str]:
        async with FakeApiServer() as api:
            return await body(api)

    timeline = asyncio.run(main())
    assert timeline[:3] == ["a starts", "a stops", "b starts"]


def test_inconsistent_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        LeaderElector(None, LeaseConfig("x", "ns", "me", 10, 15, 2), lambda: None, asyncio.sleep)  # type: ignore[arg-type]


class _CancelledMidRenewal(LeaderElector):
    """Its second renewal cancels the task running the elector and then succeeds: the cancel lands exactly as the
    renewal completes, the moment Python 3.11's asyncio.wait_for swallows a cancel."""

    task: asyncio.Task[None]
    renewals = 0
    released = False

    async def try_acquire_or_renew(self) -> bool:
        self.renewals += 1
        if self.renewals == 2:
            self.task.cancel()
        return True

    async def release(self) -> None:
        self.released = True


def test_a_cancel_that_lands_as_a_renewal_completes_still_stops_the_elector() -> None:
    async def main() -> _CancelledMidRenewal:
        async def stopped() -> None:
            pass

        elector = _CancelledMidRenewal(None, LeaseConfig("tabjob", "ns", "a", **FAST), lambda: None, stopped)
        elector.task = asyncio.create_task(elector.run())
        done, _ = await asyncio.wait([elector.task], timeout=5)
        assert done, "the elector kept renewing after its task was cancelled"
        return elector

    elector = asyncio.run(main())
    assert elector.task.cancelled() and elector.released and not elector.leading
