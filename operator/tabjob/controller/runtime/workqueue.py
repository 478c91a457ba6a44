"""The work queue: one coalescing worker per job, delayed wake-ups, per-job back-off, and an on/off gate.

Level-based (controller-runtime's workqueue): a watch event only marks a job dirty; the worker reads the latest
cached state, so a burst of events is one pass and a missed one changes nothing. While the gate is closed (this
replica is not the leader) nothing runs: no pass, no timer, no probe; dirty keys wait for the gate to open.

Workers, their done-callbacks and timers run in an empty context: asyncio would copy the current one, and inside a
kopf handler that holds the handler's cause with the whole watch event, kept alive as long as the timer waits (a
running job re-arms one forever) or the worker waits for a slot (in a burst of a thousand jobs, a thousand events).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
import time
from collections.abc import Awaitable, Callable

from tabjob.controller.runtime import metrics

log = logging.getLogger("tabjob.operator")
Key = tuple[str, str]  # (namespace, name)


def backoff(failures: int, base: float, cap: float, rand: Callable[[], float] = random.random) -> float:
    """Exponential back-off with full jitter on the upper half: base * 2^(n-1), capped, times [0.5, 1)."""
    ceiling = min(cap, base * 2 ** max(0, failures - 1))
    return ceiling * (0.5 + 0.5 * rand())


class WorkQueue:
    def __init__(
        self,
        work: Callable[[Key], Awaitable[None]],
        base_delay: float = 0.5,
        max_delay: float = 300.0,
        concurrency: int = 16,
    ) -> None:
        self._work = work
        # At most this many passes at once (controller-runtime's MaxConcurrentReconciles): a pass holds its job, plan
        # and pods decoded while it waits on the API, and the API pool serves only a few calls at a time anyway, so
        # a burst of a thousand jobs would otherwise hold a thousand decoded jobs at its peak for no gain.
        self._slots = asyncio.Semaphore(concurrency)
        self.base_delay, self.max_delay = base_delay, max_delay
        self.active = False
        self._dirty: set[Key] = set()
        self._busy: set[Key] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: dict[Key, tuple[float, asyncio.TimerHandle]] = {}
        self._failures: dict[Key, int] = {}
        self.wanted: Callable[[Key], bool] = lambda key: True  # is the key still worth a pass (job still cached)?

    # ------------------------------------------------------------------------------ the gate

    def start(self) -> None:
        """Open the gate: every key marked while it was closed gets its pass."""
        self.active = True
        for key in list(self._dirty):
            self._spawn(key)

    async def stop(self) -> None:
        """Close the gate and wait for passes in flight: after this returns, this replica writes nothing."""
        self.active = False
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------------------ marking

    def add(self, key: Key) -> None:
        self._dirty.add(key)
        if self.active:
            self._spawn(key)

    def forget(self, key: Key) -> None:
        self._dirty.discard(key)
        self._failures.pop(key, None)
        self._cancel_timer(key)

    def _spawn(self, key: Key) -> None:
        if key in self._busy:
            return
        self._busy.add(key)
        task = asyncio.get_running_loop().create_task(self._drain(key), context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard, context=contextvars.Context())

    async def _drain(self, key: Key) -> None:
        try:
            while key in self._dirty and self.active:
                async with self._slots:  # events that arrive while the pass waits for a slot join this pass
                    if not self.active:
                        break
                    self._dirty.discard(key)
                    if not self.wanted(key):
                        break
                    await self._pass(key)
        finally:
            self._busy.discard(key)
            if key in self._dirty and self.active:  # an event arrived as we were leaving
                self._spawn(key)

    async def _pass(self, key: Key) -> None:
        started = time.monotonic()
        try:
            await self._work(key)
        except asyncio.CancelledError:
            raise
        except Exception:  # a pass that raised is retried with back-off, never at once
            metrics.RECONCILE_ERRORS.inc()
            log.exception("reconcile of %s/%s failed", *key)
            self.retry(key)
        finally:
            metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)

    # ------------------------------------------------------------------------------ delays

    def retry(self, key: Key) -> float:
        """Requeue after a failure: exponential back-off with jitter, per job. Returns the delay."""
        n = self._failures[key] = self._failures.get(key, 0) + 1
        delay = backoff(n, self.base_delay, self.max_delay)
        self.after(key, delay)
        return delay

    def succeeded(self, key: Key) -> None:
        self._failures.pop(key, None)

    def failures(self, key: Key) -> int:
        return self._failures.get(key, 0)

    def after(self, key: Key, delay: float) -> None:
        if not self.active:
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + max(0.05, delay)
        current = self._timers.get(key)
        if current and current[0] <= due and not current[1].cancelled():
            return  # an earlier wake-up is already scheduled
        self._cancel_timer(key)
        self._timers[key] = (due, loop.call_at(due, self._wake, key, context=contextvars.Context()))

    def _wake(self, key: Key) -> None:
        self._timers.pop(key, None)
        if self.wanted(key):
            self.add(key)

    def _cancel_timer(self, key: Key) -> None:
        entry = self._timers.pop(key, None)
        if entry:
            entry[1].cancel()

    @property
    def timers(self) -> dict[Key, tuple[float, asyncio.TimerHandle]]:
        return self._timers
