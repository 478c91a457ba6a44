"""The reconcile loop: a watch-fed cache, one coalescing worker per job, and the API calls `decide` asks for.

Level-based (kopf's reconciliation docs; controller-runtime's shape): every watch event only marks a job dirty;
the worker reads the latest cached state and converges it, so a missed or repeated event changes nothing. Work
is bounded: one reconcile per job at a time, bursts of events coalesce into one pass, API calls go through a
token bucket, and the only polling is the progress read of *running* jobs (every `progress_interval`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, cast

from pydantic import ValidationError

from tabjob.api import GROUP, PLURAL, VERSION, parse_manifest
from tabjob.errors import SpecError
from tabjob.operator import metrics
from tabjob.operator.builders import LABEL_JOB, JobRef, build_children, configmap_name
from tabjob.operator.config import Settings
from tabjob.operator.status import Decision, Event, Observed, decide, parse_time, status_changed
from tabjob.planner import plan_job
from tabjob.results_model import ProgressSnapshot

log = logging.getLogger("tabjob.operator")
Key = tuple[str, str]  # (namespace, name)


class TokenBucket:
    """client-go's rate limiter: `qps` sustained, `burst` at once."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, burst
        self.tokens = float(burst)
        self.stamp = time.monotonic()
        self.lock = asyncio.Lock()

    async def take(self) -> None:
        async with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
            self.stamp = now
            if self.tokens < 1:
                await asyncio.sleep((1 - self.tokens) / self.qps)
                self.tokens = 1
                self.stamp = time.monotonic()
            self.tokens -= 1


def slim(body: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps of an object: managedFields and kubectl's last-applied copy are most of its bytes."""
    meta = dict(body.get("metadata") or {})
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if annotations and "kubectl.kubernetes.io/last-applied-configuration" in annotations:
        meta["annotations"] = {
            k: v for k, v in annotations.items() if k != "kubectl.kubernetes.io/last-applied-configuration"
        }
    return {**body, "metadata": meta}


def _rv(obj: dict[str, Any]) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


class Reconciler:
    def __init__(self, settings: Settings, api_client: Any) -> None:
        from kubernetes import client

        self.settings = settings
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.api_exception = client.ApiException
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="tabjob-api")
        self.bucket = TokenBucket(settings.api_qps, settings.api_burst)
        self.jobs: dict[Key, dict[str, Any]] = {}
        self.pods: dict[Key, dict[str, dict[str, Any]]] = {}
        self.configmaps: set[Key] = set()  # (namespace, job name) whose plan ConfigMap exists
        self.services: set[Key] = set()
        self._dirty: set[Key] = set()
        self._busy: set[Key] = set()
        self._timers: dict[Key, tuple[float, asyncio.TimerHandle]] = {}
        self._progress_at: dict[Key, float] = {}
        # Parsing, planning and building depend only on (uid, generation, attempt): done once, not per event.
        self._desired: dict[Key, tuple[tuple[str, int, int], Any]] = {}
        self.book = metrics.PhaseBook()

    # ------------------------------------------------------------------------------ watch events

    def on_job(self, event_type: str | None, body: dict[str, Any]) -> None:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if event_type == "DELETED":
            self.jobs.pop(key, None)
            self.pods.pop(key, None)
            self.configmaps.discard(key)
            self.services.discard(key)
            self._cancel_timer(key)
            self._desired.pop(key, None)
            self._progress_at.pop(key, None)
            self.book.forget(f"{key[0]}/{key[1]}")
            return
        body = slim(body)
        cached = self.jobs.get(key)
        if cached is None or _rv(body) >= _rv(cached) or cached["metadata"].get("uid") != body["metadata"]["uid"]:
            self.jobs[key] = body
        self.trigger(key)

    def on_child(self, kind: str, event_type: str | None, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        job = (meta.get("labels") or {}).get(LABEL_JOB)
        if not job:
            return
        key = (meta["namespace"], job)
        if kind == "Pod":
            pods = self.pods.setdefault(key, {})
            if event_type == "DELETED":
                pods.pop(meta["name"], None)
            else:
                pods[meta["name"]] = slim(body)
        else:
            names = self.configmaps if kind == "ConfigMap" else self.services
            expected = configmap_name(job) if kind == "ConfigMap" else job
            if meta["name"] == expected:
                (names.discard if event_type == "DELETED" else names.add)(key)
        if key in self.jobs:
            self.trigger(key)

    # ------------------------------------------------------------------------------ scheduling

    def trigger(self, key: Key) -> None:
        """Mark a job dirty; one worker per job drains it, so event bursts coalesce into one reconcile."""
        self._dirty.add(key)
        if key not in self._busy:
            self._busy.add(key)
            asyncio.get_running_loop().create_task(self._drain(key))

    async def _drain(self, key: Key) -> None:
        try:
            failures = 0
            while key in self._dirty:
                self._dirty.discard(key)
                if key not in self.jobs:
                    break
                started = time.monotonic()
                try:
                    await self.reconcile(key)
                    failures = 0
                except Exception:
                    failures += 1
                    metrics.RECONCILE_ERRORS.inc()
                    log.exception("reconcile of %s/%s failed", *key)
                    self.requeue(key, min(60.0, 0.5 * 2**failures))
                finally:
                    metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)
        finally:
            self._busy.discard(key)
            if key in self._dirty:  # an event arrived as we were leaving
                self.trigger(key)

    def requeue(self, key: Key, delay: float) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + max(0.05, delay)
        current = self._timers.get(key)
        if current and current[0] <= due and not current[1].cancelled():
            return  # an earlier wake-up is already scheduled
        self._cancel_timer(key)
        self._timers[key] = (due, loop.call_at(due, self._wake, key))

    def _wake(self, key: Key) -> None:
        self._timers.pop(key, None)
        if key in self.jobs:
            self.trigger(key)

    def _cancel_timer(self, key: Key) -> None:
        entry = self._timers.pop(key, None)
        if entry:
            entry[1].cancel()

    # ------------------------------------------------------------------------------ API calls

    async def call(self, verb: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        await self.bucket.take()
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self.pool, lambda: fn(*args, **kwargs))
        except self.api_exception as exc:
            metrics.API_REQUESTS.labels(verb, str(exc.status)).inc()
            raise
        metrics.API_REQUESTS.labels(verb, "200").inc()
        return result

    async def _create(self, obj: dict[str, Any]) -> None:
        ns = obj["metadata"]["namespace"]
        method = {"Pod": "pod", "Service": "service", "ConfigMap": "config_map"}[obj["kind"]]
        fn = getattr(self.core, f"create_namespaced_{method}")
        try:
            await self.call("create", fn, ns, obj, _preload_content=False)
        except self.api_exception as exc:
            if exc.status != 409:  # AlreadyExists: created by an earlier run of this reconcile; nothing to do
                raise

    async def _delete_pod(self, ns: str, name: str) -> None:
        try:
            await self.call(
                "delete", self.core.delete_namespaced_pod, name, ns, grace_period_seconds=5, _preload_content=False
            )
        except self.api_exception as exc:
            if exc.status != 404:
                raise

    async def _list_pods(self, key: Key) -> list[dict[str, Any]]:
        """A fresh list, read only before creating pods: a cache that is still filling must not cause a retry."""
        resp = await self.call(
            "list",
            self.core.list_namespaced_pod,
            key[0],
            label_selector=f"{LABEL_JOB}={key[1]}",
            _preload_content=False,
        )
        items: list[dict[str, Any]] = json.loads(resp.data)["items"]
        self.pods[key] = {p["metadata"]["name"]: p for p in items}
        return items

    async def _patch_status(self, job: dict[str, Any], status: dict[str, Any]) -> dict[str, Any] | None:
        meta = job["metadata"]
        # JSON patch with a resourceVersion test: a status computed from a stale cache is refused, not written.
        body = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
            {"op": "add", "path": "/status", "value": status},
        ]
        try:
            resp = await self.call(
                "patch",
                self.custom.patch_namespaced_custom_object_status,
                GROUP,
                VERSION,
                meta["namespace"],
                PLURAL,
                meta["name"],
                body,
                _content_type="application/json-patch+json",
                # Raw JSON: deserialising into client models costs more CPU than the request itself.
                _preload_content=False,
            )
        except self.api_exception as exc:
            if exc.status in (409, 422, 404):
                return None
            raise
        return cast(dict[str, Any], json.loads(resp.data))

    async def _refresh_job(self, key: Key) -> None:
        try:
            fresh = await self.call(
                "get", self.custom.get_namespaced_custom_object, GROUP, VERSION, key[0], PLURAL, key[1]
            )
        except self.api_exception as exc:
            if exc.status == 404:
                self.jobs.pop(key, None)
                return
            raise
        self.jobs[key] = fresh

    async def _post_event(self, job: dict[str, Any], ev: Event) -> None:
        meta = job["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "TabularJob",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": ev.type,
            "reason": ev.reason,
            "message": ev.message[:1024],
            "firstTimestamp": now[:19] + "Z",
            "lastTimestamp": now[:19] + "Z",
            "eventTime": now,
            "count": 1,
            "source": {"component": "tabjob-operator"},
            "reportingComponent": "tabjob.dev/operator",
            "reportingInstance": "tabjob-operator",
            "action": ev.reason,
        }
        try:
            await self.call(
                "create", self.core.create_namespaced_event, meta["namespace"], body, _preload_content=False
            )
        except self.api_exception as exc:  # events are best effort
            log.warning("event %s on %s not posted: %s", ev.reason, meta["name"], exc.reason)

    async def _read_progress(self, key: Key, pods: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Rank 0's progress endpoint (served by the trainer), read at most every `progress_interval`."""
        now = time.monotonic()
        if now - self._progress_at.get(key, 0.0) < self.settings.progress_interval:
            return None
        self._progress_at[key] = now
        for pod in pods:
            if (pod["metadata"].get("labels") or {}).get("tabjob.dev/rank") != "0":
                continue
            ip = (pod.get("status") or {}).get("podIP")
            port = next(
                (
                    p["containerPort"]
                    for c in pod["spec"]["containers"]
                    for p in c.get("ports") or []
                    if p.get("name") == "progress"
                ),
                None,
            )
            if ip and port:
                return await asyncio.get_running_loop().run_in_executor(self.pool, _fetch_progress, ip, port)
        return None

    # ------------------------------------------------------------------------------ reconcile

    def observe(self, job: dict[str, Any], pods: list[dict[str, Any]], progress: dict[str, Any] | None) -> Observed:
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        status = job.get("status") or {}
        ref = JobRef(key[1], key[0], job["metadata"]["uid"], int(job["metadata"].get("generation") or 1))
        attempt = int(status.get("restarts") or 0)
        memo_key = (ref.uid, ref.generation, attempt)
        memo = self._desired.get(key)
        if memo is None or memo[0] != memo_key:
            desired = plan_json = None
            problems: list[str] = []
            try:
                parsed = parse_manifest({k: v for k, v in job.items() if k != "status"})
                plan = plan_job(parsed)
                desired = build_children(parsed, plan, ref, attempt, self.settings)
                plan_json = plan.to_json_dict()
            except SpecError as exc:
                problems = exc.lines()
            memo = (memo_key, (desired, plan_json, problems))
            self._desired[key] = memo
        desired, plan_json, problems = memo[1]
        return Observed(
            job=job,
            desired=desired,
            plan_json=plan_json,
            spec_problems=problems,
            pods=pods,
            have_configmap=key in self.configmaps,
            have_service=key in self.services,
            now=datetime.now(UTC),
            progress=progress,
            retry_base_delay=self.settings.retry_base_delay,
            retry_max_delay=self.settings.retry_max_delay,
        )

    async def reconcile(self, key: Key) -> None:
        job = self.jobs[key]
        pods = list(self.pods.get(key, {}).values())
        progress = None
        if (job.get("status") or {}).get("phase") == "Running":
            progress = await self._read_progress(key, pods)
        d = decide(self.observe(job, pods, progress))
        # A job with a status has been reconciled before, so the cache may lag its pods (an operator that just
        # restarted is still receiving its first watch events): list them before acting on pods, above all
        # before reading an absent pod as a deleted one and retrying the group. A brand-new job needs no list:
        # whatever exists by its deterministic names is AlreadyExists.
        old_restarts = (job.get("status") or {}).get("restarts") or 0
        acts_on_pods = any(o["kind"] == "Pod" for o in d.create) or d.delete_pods
        if job.get("status") and (acts_on_pods or (d.status.get("restarts") or 0) != old_restarts):
            pods = await self._list_pods(key)
            d = decide(self.observe(job, pods, progress))
        await self.execute(key, job, d)

    async def execute(self, key: Key, job: dict[str, Any], d: Decision) -> None:
        ns = key[0]
        if d.delete_job:
            with contextlib.suppress(self.api_exception):
                await self.call(
                    "delete",
                    self.custom.delete_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    ns,
                    PLURAL,
                    key[1],
                    propagation_policy="Background",
                )
            return
        # Children first, status after: a crash in between leaves children that the next pass adopts by name.
        creates = [o for o in d.create if o["kind"] != "Pod"]
        await asyncio.gather(*(self._create(o) for o in creates))
        await asyncio.gather(*(self._create(o) for o in d.create if o["kind"] == "Pod"))
        await asyncio.gather(*(self._delete_pod(ns, name) for name in d.delete_pods))
        old = job.get("status") or {}
        if status_changed(old, d.status):
            resp = await self._patch_status(job, d.status)
            if resp is None:
                # Someone (or our own earlier patch) changed the job since the cache saw it: read it and go again.
                await self._refresh_job(key)
                self.trigger(key)
                return
            if _rv(resp) >= _rv(self.jobs.get(key, resp)):
                self.jobs[key] = resp
            self._account(key, job, old, d.status)
            await asyncio.gather(*(self._post_event(job, ev) for ev in d.events))
        if d.requeue_after is not None:
            self.requeue(key, d.requeue_after)
        if d.read_progress:
            self.requeue(key, self.settings.progress_interval)

    def _account(self, key: Key, job: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
        phase = new.get("phase")
        self.book.update(f"{key[0]}/{key[1]}", phase, int(new.get("requestedGpus") or 0))
        if phase == "Running" and old.get("phase") != "Running" and not old.get("restarts"):
            created = parse_time(job["metadata"].get("creationTimestamp"))
            if created:
                metrics.TIME_TO_RUNNING.observe((datetime.now(UTC) - created).total_seconds())
        if int(new.get("restarts") or 0) > int(old.get("restarts") or 0):
            metrics.RETRIES.inc()


def _fetch_progress(ip: str, port: int) -> dict[str, Any] | None:
    """GET http://<rank 0>:<port>/progress -> the status.progress fields of a ProgressSnapshot.

    One request: a second path tried after a failure only doubled the timeout when rank 0 was not serving yet.
    """
    try:
        with urllib.request.urlopen(f"http://{ip}:{port}/progress", timeout=2) as resp:
            return normalize_progress(resp.read())
    except OSError:
        return None


def normalize_progress(body: bytes | str) -> dict[str, Any] | None:
    """A ProgressSnapshot (results_model.py) as status.progress fields; anything else is no progress at all."""
    try:
        snap = ProgressSnapshot.model_validate_json(body, by_name=False)  # the wire spelling only
    except ValidationError:
        return None
    return snap.model_dump(
        by_alias=True, exclude_none=True, include={"fits_done", "fits_failed", "fits_total", "best_score", "best_model"}
    )
