"""The reconciler: watch events feed a cache; each pass is observe -> decide -> execute, one way.

`decide` (decide.py) is pure; this module only gathers what it needs and carries out what it returns, in an order
that is safe to interrupt at any instant: children are created first (a crash leaves objects the next pass adopts
by name), then the status is written, and only then are pods deleted, so a verdict is on record before the pods
that led to it disappear. Every API failure is classified (kube.py): retryable ones become a per-job back-off with
jitter; a refused child or status is recorded on the job's key (`Refusal`) and ends the pass, and the next pass
observes it, so `decide` turns it into a condition and an Event. `execute` never decides again, as in JobSet: each
pass acts on one decision, and whatever it learns is an observation for the next one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from tabjob.api import LABEL_RANK, parse_manifest
from tabjob.api.errors import SpecError
from tabjob.api.platform_policy import Policy, PolicyError, read_policy_dir
from tabjob.controller.config import Settings
from tabjob.controller.policy import kueue
from tabjob.controller.policy.builders import Children, JobRef, build_children
from tabjob.controller.policy.decide import decide
from tabjob.controller.policy.decision import ChildFailure, Decision, Observed, parse_time, status_changed
from tabjob.controller.policy.results import plan_summary
from tabjob.controller.policy.ttl import finished
from tabjob.controller.runtime import metrics
from tabjob.controller.runtime.cache import Cache, Desired, Packed, owner_uid, resource_version, slim
from tabjob.controller.runtime.kube import ApiFailure, Kube
from tabjob.controller.runtime.packing import pack, unpack
from tabjob.controller.runtime.progress import ProgressProbe, progress_address
from tabjob.controller.runtime.workqueue import Key, WorkQueue
from tabjob.planner import plan_job

log = logging.getLogger("tabjob.operator")


@dataclasses.dataclass(frozen=True)
class Refusal:
    """What the API server refused a job's pass, kept on its key for the next pass to observe.

    A refused child is seen by one pass (it writes the condition; the pass after tries again, with back-off). A
    refused status stays for the job's (uid, generation): the same spec computes the same status.
    """

    job: tuple[str, int]  # the (uid, generation) refused; a new spec or a recreated job starts afresh
    create_failure: ChildFailure | None = None
    status_rejected: str | None = None  # the API server's message
    reported: bool = False  # even the smallest status was refused, and an Event said so (once)

    def observed(self) -> dict[str, Any]:
        """The fields of `Observed` this refusal sets."""
        return {"create_failure": self.create_failure, "status_rejected": self.status_rejected}


def identity(job: dict[str, Any]) -> tuple[str, int]:
    return job["metadata"]["uid"], int(job["metadata"].get("generation") or 1)


def plan_children(job: dict[str, Any], ref: JobRef, attempt: int, settings: Settings) -> Desired:
    """Parse, plan and build: CPU-bound, so it runs on the planning thread, never on the event loop."""
    try:
        parsed = parse_manifest({k: v for k, v in job.items() if k != "status"})
        plan = plan_job(parsed)
        return build_children(parsed, plan, ref, attempt, settings), plan_summary(plan.to_json_dict()), []
    except SpecError as exc:
        return None, None, exc.lines()
    except Exception as exc:  # a planner defect must fail this job with a message, not crash-loop the operator
        log.exception("planning %s/%s failed", ref.namespace, ref.name)
        return None, None, [f"the operator could not plan this job ({type(exc).__name__}: {exc})"[:1000]]


def plan_packed(job: dict[str, Any], ref: JobRef, attempt: int, settings: Settings) -> bytes:
    """`plan_children` as compressed compact JSON. The children repeat the plan (the ConfigMap) and the pod
    template, so zlib keeps a quarter of it."""
    children, plan_json, problems = plan_children(job, ref, attempt, settings)
    kids = None if children is None else [children.configmap, children.service, children.pods]
    return pack([kids, plan_json, problems])


def unpack_desired(packed: bytes) -> Desired:
    kids, plan_json, problems = unpack(packed)
    children = None if kids is None else Children(configmap=kids[0], service=kids[1], pods=kids[2])
    return children, plan_json, problems


class PolicySource:
    """The platform's policy from the mounted ConfigMap, read again every `settings.policy_reload` seconds. A policy
    that cannot be read keeps the last one read (logged): the first read happens at start, where it fails loudly."""

    def __init__(self, settings: Settings) -> None:
        self.directory = settings.policy_dir
        self.interval = settings.policy_reload
        self.policy = read_policy_dir(self.directory) if self.directory else Policy()
        self._read_at = time.monotonic()

    def current(self) -> Policy:
        if self.directory and time.monotonic() - self._read_at >= self.interval:
            self._read_at = time.monotonic()
            try:
                self.policy = read_policy_dir(self.directory)
            except (OSError, PolicyError) as exc:
                log.error("the policy in %s cannot be read, keeping the last one: %s", self.directory, exc)
        return self.policy


class Reconciler:
    def __init__(self, settings: Settings, api_client: Any) -> None:
        self.settings = settings
        self.kube = Kube(api_client, settings.api_qps, settings.api_burst)
        self.queue = WorkQueue(self.reconcile, base_delay=0.5, max_delay=settings.retry_max_delay)
        self.queue.wanted = lambda key: key in self.jobs
        self.probe = ProgressProbe(deadline=settings.progress_deadline)
        self.policy = PolicySource(settings)
        # One planning thread: a huge plan delays other plans, never the loop, and one plan at a time bounds memory.
        self.planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tabjob-plan")
        self.identity = settings.identity
        self.cache = Cache()
        self._progress_at: dict[Key, float] = {}
        self._refusals: dict[Key, Refusal] = {}  # what the API server refused, for the next pass to observe
        self._listed: set[Key] = set()  # jobs whose pods were just listed from the API server for the next pass
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
        self._refusals.pop(key, None)
        self._listed.discard(key)
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
        stopped = await self._missed_kueue_stop(key, job, desired, pods)
        obs = self.cache.observe(
            job, desired, pods, self.settings, progress=progress, workload=workload, kueue_stopped=stopped,
            policy=self.policy.current(), **self._refused(key, job),
        )  # fmt: skip
        d = decide(obs)
        if self._pods_may_lag(key, job, d):
            # A job with a status has been reconciled before, so the cache may lag its pods (an operator that just
            # restarted is still receiving its first watch events): list them before acting on pods, above all
            # before reading an absent pod as a deleted one and retrying the group. The next pass decides on them.
            # A brand-new job needs no list: whatever exists by its deterministic names is AlreadyExists.
            self.cache.set_pods(key, await self.kube.list_pods(key[0], key[1]))
            self._listed.add(key)
            self.queue.add(key)
            return
        await self.execute(key, obs, d)

    async def _missed_kueue_stop(
        self, key: Key, job: dict[str, Any], desired: Desired, pods: list[dict[str, Any]]
    ) -> str | None:
        """Kueue's Event on this attempt's pods that went unseen while the job ran: an operator down through a whole
        eviction finds neither the pods (Kueue deleted them) nor their Workload (it goes with them), and without
        this would count a preemption as a failure. One list, only in that state, which the pass then leaves."""
        children = desired[0]
        names = (
            kueue.missed_stop_candidates(job, [p["metadata"]["name"] for p in children.pods], pods) if children else []
        )
        if not names or not self.settings.kueue:  # without kueue.enabled the chart grants no list on events
            return None
        # Events of this attempt only: a job deleted and created again reuses the pod names.
        status = job.get("status") or {}
        since = str(status.get("startTime") or job["metadata"].get("creationTimestamp") or "")
        try:
            return kueue.stop_message(await self.kube.list_pod_events(key[0], kueue.STOPPED), names, since)
        except ApiFailure as failure:  # unreadable (RBAC without list on events): decide as before, from pods alone
            log.info("%s/%s: Kueue's events unreadable (%s)", key[0], key[1], failure)
            return None

    def _refused(self, key: Key, job: dict[str, Any]) -> dict[str, Any]:
        """What the API server refused this job's earlier pass, as fields of `Observed`."""
        refusal = self._refusals.get(key)
        if refusal is None:
            return {}
        if refusal.job != identity(job):  # refused for an older spec, or a job since deleted and recreated
            del self._refusals[key]
            return {}
        return refusal.observed()

    def _pods_may_lag(self, key: Key, job: dict[str, Any], d: Decision) -> bool:
        """Whether `d` acts on pods the watch cache may not have caught up with (a list is then due first)."""
        if key in self._listed:  # listed for this very pass
            self._listed.discard(key)
            return False
        old_attempt = kueue.attempt_of(job.get("status") or {})
        acts_on_pods = any(o["kind"] == "Pod" for o in d.create) or d.delete_pods or d.force_delete
        return bool(job.get("status")) and bool(acts_on_pods or kueue.attempt_of(d.status) != old_attempt)

    def _refuse(self, key: Key, job: dict[str, Any], **refused: Any) -> None:
        """Record a refusal on the job's key and come back at once: the next pass observes it."""
        kept = self._refusals.get(key)
        base = kept if kept is not None and kept.job == identity(job) else Refusal(identity(job))
        self._refusals[key] = dataclasses.replace(base, **refused)
        self.queue.add(key)

    async def execute(self, key: Key, obs: Observed, d: Decision) -> None:
        job = obs.job
        if d.delete_job:
            await self.kube.delete_job(*key)
            return
        refusal = self._refusals.get(key)
        if obs.create_failure is not None and refusal is not None:  # observed by this pass: the next one tries again
            self._refusals[key] = dataclasses.replace(refusal, create_failure=None)
        # 1. Children: the plan ConfigMap (updated before any pod of a new generation), the Service, then pods.
        failure = await self._create(d)
        if failure is not None:
            # On record for the next pass (a condition and an Event, never a retry loop); nothing more this pass.
            self._refuse(key, job, create_failure=failure)
            return
        # 2. The status, before any deletion.
        if status_changed(job.get("status"), d.status) and not await self._write_status(key, obs, d):
            return
        # 3. Deletions, now that the verdict that calls for them is on record.
        deletes = [self.kube.delete_pod(key[0], n) for n in d.delete_pods]
        deletes += [self.kube.delete_pod(key[0], n, grace=0) for n in d.force_delete]
        results = await asyncio.gather(*deletes, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        # 4. When to look again: a refusal that may pass (a quota, a busy server) with back-off and jitter.
        for e in errors:
            log.warning("%s/%s: %s", *key, e)
        if errors or (obs.create_failure is not None and d.status.get("phase") != "Failed"):
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

    async def _write_status(self, key: Key, obs: Observed, d: Decision) -> bool:
        """Write the status; True once it is on record, so the deletions it calls for may go ahead."""
        try:
            resp = await self.kube.patch_status(obs.job, d.status)
        except ApiFailure as exc:
            await self._status_refused(key, obs, exc)
            return False
        self._status_written(key, obs.job, d.status, resp)
        for ev in d.events:
            await self._event(obs.job, ev.type, ev.reason, ev.message)
        return True

    async def _status_refused(self, key: Key, obs: Observed, exc: ApiFailure) -> None:
        """A status write that did not land, by what the API server said."""
        if exc.status == 409:  # changed since the cache saw it (often our own write): read it, look again
            fresh = await self.kube.get_job(*key)
            if fresh is None:
                self.jobs.pop(key, None)
            else:
                self.jobs[key] = slim(fresh)
                self.queue.add(key)
        elif exc.status == 404:
            self.jobs.pop(key, None)
        elif exc.retryable:
            log.warning("%s/%s: %s; retrying with back-off", *key, exc)
            self.queue.retry(key)
        else:  # terminal for this status: retrying the same write can only fail the same way
            await self._status_rejected(key, obs, exc)

    async def _status_rejected(self, key: Key, obs: Observed, exc: ApiFailure) -> None:
        """The next pass observes a refused status and computes the smallest one; if that is refused too, an
        Event says so once per spec generation and nothing more is tried."""
        job = obs.job
        if obs.status_rejected is None:
            log.warning("%s/%s: status refused: %s", *key, exc)
            self._refuse(key, job, status_rejected=exc.message)
            return
        refusal = self._refusals.get(key)
        if refusal is not None and not refusal.reported:
            self._refusals[key] = dataclasses.replace(refusal, reported=True)
            log.error("%s/%s: even the smallest status was refused: %s", *key, exc)
            await self._event(job, "Warning", "StatusRejected", f"the job's status cannot be written: {exc}")

    def _status_written(self, key: Key, job: dict[str, Any], status: dict[str, Any], resp: dict[str, Any]) -> None:
        """The written job into the cache (unless a newer one is there already), and the phase metrics."""
        if resource_version(resp) >= resource_version(self.jobs.get(key, resp)):
            self.jobs[key] = slim(resp)
        self._account(key, job, job.get("status") or {}, status)

    async def _event(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        # The log tells the story the object's events tell (kopf's own lines are off at INFO: one per watch event).
        meta = job["metadata"]
        level = logging.WARNING if type_ == "Warning" else logging.INFO
        log.log(level, "%s/%s: %s: %s", meta.get("namespace"), meta["name"], reason, message)
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
