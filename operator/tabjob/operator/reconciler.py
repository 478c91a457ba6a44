"""The reconciler: watch events feed a cache; each pass is observe -> decide -> execute.

`decide` (decide.py) is pure; this module only gathers what it needs and carries out what it returns, in an order
that is safe to interrupt at any instant: children are created first (a crash leaves objects the next pass adopts
by name), then the status is written, and only then are pods deleted, so a verdict is on record before the pods
that led to it disappear. Every API failure is classified (kube.py): terminal ones become a condition and an Event
through `decide`, retryable ones a per-job back-off with jitter; none aborts a pass unrecorded or loops hot.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from tabjob.api import LABEL_RANK, parse_manifest
from tabjob.errors import SpecError
from tabjob.operator import kueue, metrics
from tabjob.operator.builders import Children, JobRef, build_children
from tabjob.operator.cache import Cache, Desired, Packed, owner_uid, pack, resource_version, slim, unpack
from tabjob.operator.config import Settings
from tabjob.operator.decide import decide
from tabjob.operator.decision import ChildFailure, Decision, Observed, parse_time, status_changed
from tabjob.operator.kube import ApiFailure, Kube
from tabjob.operator.progress import ProgressProbe, progress_address
from tabjob.operator.ttl import finished
from tabjob.operator.workqueue import Key, WorkQueue
from tabjob.planner import plan_job

log = logging.getLogger("tabjob.operator")


def plan_children(job: dict[str, Any], ref: JobRef, attempt: int, settings: Settings) -> Desired:
    """Parse, plan and build: CPU-bound, so it runs on the planning thread, never on the event loop."""
    try:
        parsed = parse_manifest({k: v for k, v in job.items() if k != "status"})
        plan = plan_job(parsed)
        return build_children(parsed, plan, ref, attempt, settings), plan.to_json_dict(), []
    except SpecError as exc:
        return None, None, exc.lines()
    except Exception as exc:  # a planner defect must fail this job with a message, not crash-loop the operator
        log.exception("planning %s/%s failed", ref.namespace, ref.name)
        return None, None, [f"the operator could not plan this job ({type(exc).__name__}: {exc})"[:1000]]


def plan_packed(job: dict[str, Any], ref: JobRef, attempt: int, settings: Settings) -> bytes:
    """`plan_children` as compressed compact JSON, the plan's fit list reduced to its length (all that status
    shows). The children repeat the plan (the ConfigMap) and the pod template, so zlib keeps a quarter of it."""
    children, plan_json, problems = plan_children(job, ref, attempt, settings)
    if plan_json is not None:
        plan_json = {**plan_json, "fits": len(plan_json["fits"])}
    kids = None if children is None else [children.configmap, children.service, children.pods]
    return pack([kids, plan_json, problems])


def unpack_desired(packed: bytes) -> Desired:
    kids, plan_json, problems = unpack(packed)
    children = None if kids is None else Children(configmap=kids[0], service=kids[1], pods=kids[2])
    return children, plan_json, problems


class Reconciler:
    def __init__(self, settings: Settings, api_client: Any) -> None:
        self.settings = settings
        self.kube = Kube(api_client, settings.api_qps, settings.api_burst)
        self.queue = WorkQueue(self.reconcile, base_delay=0.5, max_delay=settings.retry_max_delay)
        self.queue.wanted = lambda key: key in self.jobs
        self.probe = ProgressProbe(deadline=settings.progress_deadline)
        # One planning thread: a huge plan delays other plans, never the loop, and one plan at a time bounds memory.
        self.planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tabjob-plan")
        self.identity = os.environ.get("POD_NAME") or os.uname().nodename
        self.cache = Cache()
        self._progress_at: dict[Key, float] = {}
        self._refused: set[tuple[str, int]] = set()  # (uid, generation) whose smallest status was refused too
        # Parsing, planning and building depend only on (uid, generation, attempt): done once, not per event.
        # Kept compact (JSON bytes; the plan without its fit list), decoded per pass: a few KiB per job, not tens.
        self._desired: dict[Key, tuple[tuple[str, int, int], bytes]] = {}
        self.book = metrics.PhaseBook()

    # ------------------------------------------------------------------------------ leadership

    def start(self) -> None:
        """Begin (or resume) work: every cached job gets a pass, since the previous leader may have died mid-way."""
        self.queue.start()
        for key in list(self.jobs):
            self.queue.add(key)

    async def stop(self) -> None:
        """Stop all work (passes, timers, progress reads) and wait for passes in flight; the cache stays warm."""
        await self.queue.stop()
        self._progress_at.clear()

    # ------------------------------------------------------------------------------ watch events

    @property
    def jobs(self) -> Packed:
        return self.cache.jobs

    def on_job(self, event_type: str | None, body: dict[str, Any]) -> None:
        key = self.cache.on_job(event_type, body)
        if event_type != "DELETED":
            self.queue.add(key)
            return
        self._desired.pop(key, None)
        self._progress_at.pop(key, None)
        self.queue.forget(key)
        self.book.forget(f"{key[0]}/{key[1]}")

    def on_workload(self, event_type: str | None, body: dict[str, Any]) -> None:
        key = self.cache.on_workload(event_type, body)
        if key is not None:
            self.queue.add(key)

    def on_child(self, kind: str, event_type: str | None, body: dict[str, Any]) -> None:
        key = self.cache.on_child(kind, event_type, body)
        if key is not None:
            self.queue.add(key)

    # ------------------------------------------------------------------------------ observe

    async def _plan(self, key: Key, job: dict[str, Any]) -> Desired:
        meta = job["metadata"]
        if finished(job.get("status") or {}):  # a verdict stands (decide's first rule): nothing to build again
            self._desired.pop(key, None)
            return None, None, []
        ref = JobRef(key[1], key[0], meta["uid"], int(meta.get("generation") or 1))
        attempt = kueue.attempt_of(job.get("status") or {})
        memo_key = (ref.uid, ref.generation, attempt)
        memo = self._desired.get(key)
        if memo is None or memo[0] != memo_key:
            loop = asyncio.get_running_loop()
            packed = await loop.run_in_executor(self.planner, plan_packed, job, ref, attempt, self.settings)
            memo = (memo_key, packed)
            self._desired[key] = memo
        return unpack_desired(memo[1])

    async def _progress(self, key: Key, pods: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Rank 0's progress, read at most every `progress_interval`, within the probe's own deadline."""
        now = time.monotonic()
        if now - self._progress_at.get(key, 0.0) < self.settings.progress_interval:
            return None
        self._progress_at[key] = now
        address = progress_address(pods, LABEL_RANK)
        return await self.probe.read(*address) if address else None

    # ------------------------------------------------------------------------------ one pass

    async def reconcile(self, key: Key) -> None:
        job = self.jobs[key]
        desired = await self._plan(key, job)
        pods = self.cache.pods_of(key)
        progress = None
        if (job.get("status") or {}).get("phase") == "Running":
            progress = await self._progress(key, pods)
        workload = self.cache.workload_of(key, job)
        obs = self.cache.observe(job, desired, pods, self.settings, progress=progress, workload=workload)
        d = decide(obs)
        # A job with a status has been reconciled before, so the cache may lag its pods (an operator that just
        # restarted is still receiving its first watch events): list them before acting on pods, above all before
        # reading an absent pod as a deleted one and retrying the group. A brand-new job needs no list: whatever
        # exists by its deterministic names is AlreadyExists.
        old_attempt = kueue.attempt_of(job.get("status") or {})
        acts_on_pods = any(o["kind"] == "Pod" for o in d.create) or d.delete_pods or d.force_delete
        if job.get("status") and (acts_on_pods or kueue.attempt_of(d.status) != old_attempt):
            fresh = await self.kube.list_pods(key[0], key[1])
            self.cache.set_pods(key, fresh)
            obs = self.cache.observe(job, desired, fresh, self.settings, progress=progress, workload=workload)
            d = decide(obs)
        await self.execute(key, obs, d)

    async def execute(self, key: Key, obs: Observed, d: Decision) -> None:
        job = obs.job
        if d.delete_job:
            await self.kube.delete_job(*key)
            return
        # 1. Children: the plan ConfigMap (updated before any pod of a new generation), the Service, then pods.
        failure = await self._create(d)
        if failure is not None:
            # Decided again with the refusal on record: a condition and an Event instead of an aborted pass.
            obs = dataclasses.replace(obs, create_failure=failure)
            d = decide(obs)
        # 2. The status, before any deletion.
        if status_changed(job.get("status"), d.status):
            written = await self._write_status(key, obs, d)
            if written is None:
                return
            d = written
        # 3. Deletions, now that the verdict that calls for them is on record.
        deletes = [self.kube.delete_pod(key[0], n) for n in d.delete_pods]
        deletes += [self.kube.delete_pod(key[0], n, grace=0) for n in d.force_delete]
        results = await asyncio.gather(*deletes, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        # 4. When to look again: a refusal that may pass (a quota, a busy server) with back-off and jitter.
        for e in errors:
            log.warning("%s/%s: %s", *key, e)
        if errors or (failure is not None and d.status.get("phase") != "Failed"):
            self.queue.retry(key)
        else:
            self.queue.succeeded(key)
        if d.requeue_after is not None:
            self.queue.after(key, d.requeue_after)
        if d.read_progress:
            self.queue.after(key, self.settings.progress_interval)

    async def _create(self, d: Decision) -> ChildFailure | None:
        """Create or update what `decide` asked for; the first refusal, if any, classified."""
        first: list[ChildFailure] = []

        async def one(obj: dict[str, Any], update: bool = False) -> None:
            try:
                await (self.kube.update(obj) if update else self.kube.create(obj))
            except ApiFailure as exc:
                try:
                    if exc.status == 409 and not update and await self._ours(obj):
                        return  # AlreadyExists and ours: created by an earlier run of this pass
                except ApiFailure as lookup:  # could not tell whose it is: try again later
                    exc = lookup
                first.append(ChildFailure(exc.what, exc.status, exc.reason, exc.message))

        await asyncio.gather(*(one(o, update=True) for o in d.update))
        await asyncio.gather(*(one(o) for o in d.create if o["kind"] != "Pod"))
        if not first:  # pods only once the ConfigMap and Service they mount and resolve are there
            await asyncio.gather(*(one(o) for o in d.create if o["kind"] == "Pod"))
        return first[0] if first else None

    async def _ours(self, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        existing = await self.kube.get(obj["kind"], meta["namespace"], meta["name"])
        return existing is None or owner_uid(existing) == meta["ownerReferences"][0]["uid"]

    async def _write_status(self, key: Key, obs: Observed, d: Decision) -> Decision | None:
        """Write the status; the decision whose deletions may now go ahead, or None when none may."""
        job = obs.job
        try:
            resp = await self.kube.patch_status(job, d.status)
        except ApiFailure as exc:
            if exc.status == 409:  # changed since the cache saw it (often our own write): read it, decide again
                fresh = await self.kube.get_job(*key)
                if fresh is None:
                    self.jobs.pop(key, None)
                else:
                    self.jobs[key] = slim(fresh)
                    self.queue.add(key)
                return None
            if exc.status == 404:
                self.jobs.pop(key, None)
                return None
            if exc.retryable:
                log.warning("%s/%s: %s; retrying with back-off", *key, exc)
                self.queue.retry(key)
                return None
            # Terminal for this status: retrying the same write can only fail the same way.
            if obs.status_rejected is None:
                log.warning("%s/%s: status refused: %s", *key, exc)
                smallest = decide(dataclasses.replace(obs, status_rejected=exc.message))
                return await self._write_status(key, dataclasses.replace(obs, status_rejected=exc.message), smallest)
            mark = (job["metadata"]["uid"], int(job["metadata"].get("generation") or 1))
            if mark not in self._refused:
                self._refused.add(mark)
                log.error("%s/%s: even the smallest status was refused: %s", *key, exc)
                await self._event(job, "Warning", "StatusRejected", f"the job's status cannot be written: {exc}")
            return None
        if resource_version(resp) >= resource_version(self.jobs.get(key, resp)):
            self.jobs[key] = slim(resp)
        self._account(key, job, job.get("status") or {}, d.status)
        for ev in d.events:
            await self._event(job, ev.type, ev.reason, ev.message)
        return d

    async def _event(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        try:
            await self.kube.post_event(job, type_, reason, message, self.identity)
        except ApiFailure as exc:  # events are best effort
            log.warning("event %s on %s not posted: %s", reason, job["metadata"]["name"], exc)

    def _account(self, key: Key, job: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
        phase = new.get("phase")
        self.book.update(f"{key[0]}/{key[1]}", phase, int(new.get("requestedGpus") or 0))
        if phase == "Running" and old.get("phase") != "Running" and not old.get("restarts"):
            created = parse_time(job["metadata"].get("creationTimestamp"))
            if created:
                metrics.TIME_TO_RUNNING.observe((datetime.now(UTC) - created).total_seconds())
        if int(new.get("restarts") or 0) > int(old.get("restarts") or 0):
            metrics.RETRIES.inc()
