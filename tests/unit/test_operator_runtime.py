"""The reconciler's scheduling (coalescing, requeue) and helpers, without an API server."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from kubernetes import client

from tabjob.controller.config import Settings
from tabjob.controller.runtime.kube import TokenBucket, merge_patch
from tabjob.controller.runtime.progress import normalize_progress
from tabjob.controller.runtime.reconciler import Reconciler
from tabjob.controller.runtime.workqueue import Key
from tests.unit.fake_apiserver import apply_merge_patch


class Counting(Reconciler):
    def __init__(self) -> None:
        super().__init__(Settings(), client.ApiClient(client.Configuration()))
        self.calls: list[Key] = []

    async def reconcile(self, key: Key) -> None:
        self.calls.append(key)
        await asyncio.sleep(0.05)


def body(name: str, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"u-{name}", "resourceVersion": rv}}


def test_event_bursts_coalesce_into_few_reconciles() -> None:
    async def scenario() -> list[Key]:
        r = Counting()
        r.queue.start()
        r.on_job("ADDED", body("a"))
        for i in range(50):  # 50 pod events while the first reconcile runs
            r.on_child(
                "Pod",
                "MODIFIED",
                {"metadata": {"namespace": "ns", "name": f"a-{i % 2}", "labels": {"tabjob.dev/job-name": "a"}}},
            )
        await asyncio.sleep(0.3)
        return r.calls

    calls = asyncio.run(scenario())
    # One pass, or one plus a second for events that arrived while it ran; never one per event.
    assert calls in ([("ns", "a")], [("ns", "a"), ("ns", "a")])


def test_older_watch_events_do_not_replace_a_newer_cached_job() -> None:
    async def scenario() -> dict[str, Any]:
        r = Counting()
        r.queue.start()
        r.on_job("MODIFIED", body("a", rv="10"))
        r.on_job("MODIFIED", body("a", rv="9"))
        await asyncio.sleep(0.2)
        return r.jobs[("ns", "a")]

    assert asyncio.run(scenario())["metadata"]["resourceVersion"] == "10"


def test_deleted_job_forgets_its_children_and_timers() -> None:
    async def scenario() -> Counting:
        r = Counting()
        r.queue.start()
        r.on_job("ADDED", body("a"))
        r.queue.after(("ns", "a"), 0.1)
        r.on_job("DELETED", body("a"))
        await asyncio.sleep(0.3)
        return r

    r = asyncio.run(scenario())
    assert ("ns", "a") not in r.jobs and not r.queue.timers
    assert r.calls in ([], [("ns", "a")])


def test_requeue_keeps_the_earliest_wakeup() -> None:
    async def scenario() -> list[Key]:
        r = Counting()
        r.queue.start()
        r.on_job("ADDED", body("a"))
        await asyncio.sleep(0.1)
        r.queue.after(("ns", "a"), 0.1)
        r.queue.after(("ns", "a"), 5)
        await asyncio.sleep(0.3)
        return r.calls

    assert len(asyncio.run(scenario())) == 2


def test_token_bucket_bounds_the_rate() -> None:
    async def scenario() -> float:
        bucket = TokenBucket(qps=100, burst=5)
        t0 = time.monotonic()
        for _ in range(25):
            await bucket.take()
        return time.monotonic() - t0

    assert asyncio.run(scenario()) >= 0.18  # 5 at once, then 20 at 100/s


def test_progress_is_read_as_a_progress_snapshot() -> None:
    snap = {"fitsTotal": 6, "fitsDone": 2, "fitsFailed": 0, "bestModel": "GBM", "bestScore": 0.9}
    assert normalize_progress(json.dumps(snap)) == {
        "fitsDone": 2,
        "fitsFailed": 0,
        "fitsTotal": 6,
        "bestScore": 0.9,
        "bestModel": "GBM",
    }


@pytest.mark.parametrize(
    "body",
    [
        '{"fits_done": 1, "fits_total": 2}',  # snake_case is not the contract
        '{"fitsTotal": 2, "bestScore": NaN}',  # non-finite numbers never reach the API server
        '{"fitsTotal": 2, "extra": 1}',
        "not json",
        "[]",
    ],
)
def test_anything_but_a_progress_snapshot_is_no_progress(body: str) -> None:
    assert normalize_progress(body) is None


def test_status_merge_patch_removes_what_the_new_status_drops() -> None:
    old = {"phase": "Pending", "nextRetryTime": "t", "progress": {"fitsDone": 1, "updatedTime": "u"}, "models": [1]}
    new = {"phase": "Running", "progress": {"fitsDone": 2}, "models": [1]}
    patch = merge_patch(old, new)
    assert patch == {"phase": "Running", "nextRetryTime": None, "progress": {"fitsDone": 2, "updatedTime": None}}
    assert apply_merge_patch(old, patch) == new


def test_child_watches_are_filtered_by_the_api_server() -> None:
    """Only the job-name label's pods, ConfigMaps and Services reach the operator: a `labels=` filter on a handler
    alone runs after kopf has received, decoded and remembered every object in the watched namespaces."""
    import kopf
    from kopf._cogs.structs.references import Resource

    from tabjob.api import LABEL_JOB
    from tabjob.controller.runtime import handlers

    settings = kopf.OperatorSettings()

    async def scenario() -> None:
        r = Counting()
        configure: Any = handlers.configure  # typed by kopf's decorator as an ActivityFn, which takes every kwarg
        await configure(settings=settings, memo=handlers.memo(r))
        await r.stop()

    asyncio.run(scenario())
    for plural, kind in (("pods", "Pod"), ("configmaps", "ConfigMap"), ("services", "Service")):
        assert settings.watching.label_selectors.collect(Resource("", "v1", plural, kind=kind)) == [LABEL_JOB]
    jobs = Resource("tabjob.dev", "v1alpha1", "tabularjobs", kind="TabularJob")
    assert settings.watching.label_selectors.collect(jobs) == []
    assert settings.watching.chunk_size == handlers.LIST_PAGE  # lists come in pages, never decoded whole


def test_timers_and_workers_do_not_keep_the_handlers_context_alive() -> None:
    """kopf runs each handler in a context whose cause holds the whole watch event; a timer or task started from
    there would copy that context and keep the event alive as long as it waits (a running job's timer, forever)."""
    import contextvars
    import gc
    import weakref

    class Event(dict[str, Any]):
        pass

    cause: contextvars.ContextVar[Event] = contextvars.ContextVar("cause")

    async def scenario() -> bool:
        r = Counting()
        r.queue.start()

        def handler(event: Event) -> None:  # as kopf calls ours: with the event in a context variable
            cause.set(event)
            r.on_job("ADDED", event)
            r.queue.after(("ns", "a"), 60)

        event = Event(body("a"))
        contextvars.copy_context().run(handler, event)
        ref = weakref.ref(event)
        del event
        await asyncio.sleep(0.2)  # the pass has run; the timer waits
        gc.collect()
        waiting, alive = bool(r.queue.timers), ref() is not None
        await r.stop()
        return waiting and not alive

    assert asyncio.run(scenario())


def test_a_pass_waiting_for_its_slot_does_not_keep_the_handlers_context_alive() -> None:
    """In a burst thousands of jobs wait for a pass slot; the waiting task's done-callback must not copy the
    handler's context (a whole watch event each: the operator's resident set kept the burst's peak for good)."""
    import contextvars
    import gc
    import weakref

    from tabjob.controller.runtime.workqueue import WorkQueue

    class Event(dict[str, Any]):
        pass

    cause: contextvars.ContextVar[Event] = contextvars.ContextVar("cause")

    async def scenario() -> tuple[bool, bool]:
        gate = asyncio.Event()

        async def work(key: Key) -> None:
            await gate.wait()

        q = WorkQueue(work, concurrency=1)
        q.start()
        q.add(("ns", "first"))  # takes the only slot
        await asyncio.sleep(0)

        def handler(event: Event) -> None:
            cause.set(event)
            q.add(("ns", "second"))

        event = Event(body("second"))
        contextvars.copy_context().run(handler, event)
        ref = weakref.ref(event)
        del event
        await asyncio.sleep(0.05)
        gc.collect()
        waiting, alive = ("ns", "second") in q._busy, ref() is not None
        gate.set()
        await q.stop()
        return waiting, alive

    assert asyncio.run(scenario()) == (True, False)


def test_passes_run_at_most_concurrency_at_once_and_all_run() -> None:
    """A burst of jobs holds at most `concurrency` decoded passes at once (controller-runtime's
    MaxConcurrentReconciles); every job still gets its pass."""
    from tabjob.controller.runtime.workqueue import WorkQueue

    async def scenario() -> tuple[int, int]:
        running, peak, done = 0, 0, 0

        async def work(key: Key) -> None:
            nonlocal running, peak, done
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1
            done += 1

        q = WorkQueue(work, concurrency=4)
        q.start()
        for i in range(40):
            q.add(("ns", f"j{i}"))
        for _ in range(200):
            if done == 40:
                break
            await asyncio.sleep(0.01)
        await q.stop()
        return peak, done

    assert asyncio.run(scenario()) == (4, 40)


def test_every_object_shares_the_operators_memo() -> None:
    # kopf gives each object it sees a shallow copy of the memo it was started with and keeps it while the object
    # lives; ours is operator-wide state, so the copy must be the memo itself (memory per job).
    from kopf._core.reactor.inventory import ResourceMemories

    from tabjob.controller.runtime import handlers

    base: Any = handlers.memo(Reconciler.__new__(Reconciler))  # kopf types its memos as its own AnyMemo
    memories = ResourceMemories()
    seen: list[Any] = [
        asyncio.run(memories.recall({"metadata": {"uid": f"u{i}"}}, memobase=base)).memo for i in range(3)
    ]
    assert all(m is base for m in seen)
    assert handlers._r(seen[0]) is base["reconciler"]
