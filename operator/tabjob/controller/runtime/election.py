"""Leader election on a coordination.k8s.io/v1 Lease, the way client-go's leaderelection package does it.

A candidate acquires the Lease when it is free or its holder has not renewed it for `lease_duration` (timed by this
candidate's own clock from when it last saw the record change, so clock skew between nodes does not matter), then
renews it every `retry_period`. A leader that cannot renew within `renew_deadline` (< lease_duration, so it stops
before anyone else may start) stops *all* of its work, waits for passes in flight to end, and campaigns again.
The lease calls use their own thread and no rate limiter: a busy API pool must never cost the leadership.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client

from tabjob.controller.runtime import metrics

log = logging.getLogger("tabjob.operator")


@dataclass(frozen=True)
class LeaseConfig:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0  # controller-runtime's defaults
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        api_client: Any,
        config: LeaseConfig,
        on_started: Callable[[], None],
        on_stopped: Callable[[], Awaitable[None]],
    ) -> None:
        if not config.retry_period < config.renew_deadline < config.lease_duration:
            raise ValueError("leader election needs retry_period < renew_deadline < lease_duration")
        self.api = client.CoordinationV1Api(api_client)
        self.config = config
        self.on_started, self.on_stopped = on_started, on_stopped
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tabjob-lease")
        self.leading = False
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0  # monotonic time it was first seen

    async def _call(self, fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
        """One Lease request, raw JSON (MicroTime stays the string the API server wrote)."""
        timeout = self.config.retry_period * 2

        def request() -> dict[str, Any]:
            resp = fn(*args, _request_timeout=timeout, _preload_content=False)
            return cast(dict[str, Any], json.loads(resp.data))

        return await asyncio.get_running_loop().run_in_executor(self.pool, request)

    async def try_acquire_or_renew(self) -> bool:
        c = self.config
        try:
            lease = await self._call(self.api.read_namespaced_lease, c.name, c.namespace)
        except client.ApiException as exc:
            if exc.status != 404:
                return False
            now = _now()
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": c.name, "namespace": c.namespace},
                "spec": {
                    "holderIdentity": c.identity,
                    "leaseDurationSeconds": int(c.lease_duration),
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": 0,
                },
            }
            try:
                await self._call(self.api.create_namespaced_lease, c.namespace, body)
            except (client.ApiException, OSError, ValueError):
                return False
            return True
        except (OSError, ValueError):
            return False
        spec: dict[str, Any] = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime")))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        duration = float(spec.get("leaseDurationSeconds") or c.lease_duration)
        if holder and holder != c.identity and time.monotonic() < self._observed_at + duration:
            return False  # held by someone who renewed within the lease duration
        now = _now()
        if holder != c.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(holderIdentity=c.identity, leaseDurationSeconds=int(c.lease_duration), renewTime=now)
        try:  # the resourceVersion read above is a precondition: 409 if another candidate got there first
            await self._patch(lease["metadata"]["resourceVersion"], spec)
        except (client.ApiException, OSError, ValueError):
            return False
        return True

    async def _patch(self, resource_version: str, spec: dict[str, Any]) -> None:
        """A merge patch with a resourceVersion precondition: what client-go's Update does, under the `patch` verb
        the operator already has, so its RBAC needs no `update` anywhere."""
        c = self.config
        body = {"metadata": {"resourceVersion": resource_version}, "spec": spec}
        timeout = c.retry_period * 2

        def request() -> None:
            self.api.patch_namespaced_lease(
                c.name, c.namespace, body, _request_timeout=timeout, _content_type="application/merge-patch+json"
            )

        await asyncio.get_running_loop().run_in_executor(self.pool, request)

    async def run(self) -> None:
        """Campaign, lead until a renewal misses its deadline, stop everything, campaign again; until cancelled."""
        c = self.config
        try:
            while True:
                while not await self.try_acquire_or_renew():
                    await asyncio.sleep(c.retry_period * (1 + 0.2 * random.random()))  # client-go's jitter
                self.leading = True
                metrics.LEADER.set(1)
                log.info("leading: acquired lease %s/%s as %s", c.namespace, c.name, c.identity)
                self.on_started()
                await self._renew_until_lost()
                self.leading = False
                metrics.LEADER.set(0)
                log.warning("lost lease %s/%s: stopping all work", c.namespace, c.name)
                await self.on_stopped()
        finally:
            if self.leading:
                self.leading = False
                metrics.LEADER.set(0)
                await self.on_stopped()
                await self.release()

    async def _renew_until_lost(self) -> None:
        c = self.config
        last = time.monotonic()
        while True:
            await asyncio.sleep(c.retry_period)
            try:  # not asyncio.wait_for: on 3.11 it loses a cancel that lands as the renewal completes
                async with asyncio.timeout(c.renew_deadline):
                    ok = await self.try_acquire_or_renew()
            except TimeoutError:
                ok = False
            if ok:
                last = time.monotonic()
            elif time.monotonic() - last >= c.renew_deadline:
                return

    async def release(self) -> None:
        """On a clean shutdown hand the lease over at once (client-go's ReleaseOnCancel): the next candidate does
        not wait out the lease duration."""
        c = self.config
        try:
            lease = await self._call(self.api.read_namespaced_lease, c.name, c.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") == c.identity:
                spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_now())
                await self._patch(lease["metadata"]["resourceVersion"], spec)
        except (client.ApiException, OSError, ValueError) as exc:
            log.warning("lease %s/%s not released: %s", c.namespace, c.name, exc)
