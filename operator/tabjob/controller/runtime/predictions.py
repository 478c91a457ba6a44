"""The TabularPrediction reconciler: the TabularJob's pattern for the second kind: observe -> decide -> execute.

Watch events (handlers.py) feed its own small cache of predictions and their pods; each pass observes one prediction
(its pods, the TabularJob its spec.model.job names, from the job reconciler's cache, and, while it runs, each pod's
progress endpoint), calls the pure `decide_prediction`, then creates pods, writes the status (a merge patch with a
resourceVersion precondition) only when it changed, posts its Events, and only then deletes pods. A refused pod is
observed by the next pass. It shares the job reconciler's API client (rate limit, metrics) and runs while it does:
the leader elector starts and stops both.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from tabjob.api import GROUP, VERSION
from tabjob.api.errors import SpecError
from tabjob.api.prediction import (
    LABEL_INDEX,
    LABEL_PREDICTION,
    PREDICTION_KIND,
    PREDICTION_PLURAL,
    TabularPrediction,
)
from tabjob.api.prediction_parse import parse_prediction
from tabjob.contracts.scoring import ScoringProgress
from tabjob.controller.config import Settings
from tabjob.controller.policy import pods as podstate
from tabjob.controller.policy.builders import JobRef
from tabjob.controller.policy.decision import ChildFailure, status_changed
from tabjob.controller.policy.scoring_builders import build_scoring_pod
from tabjob.controller.policy.scoring_decide import PredictionDecision, PredictionObserved, decide_prediction
from tabjob.controller.runtime.cache import Packed, owner_uid, resource_version, slim, slim_pod
from tabjob.controller.runtime.kube import ApiFailure, Kube, merge_patch
from tabjob.controller.runtime.progress import ProgressProbe
from tabjob.controller.runtime.workqueue import Key, WorkQueue

log = logging.getLogger("tabjob.operator")


def _pod(
    tp: TabularPrediction, ref: JobRef, settings: Settings, index: int, created: int, model: str
) -> dict[str, Any]:
    return build_scoring_pod(tp, ref, model, index, created, settings)


class PredictionReconciler:
    def __init__(self, settings: Settings, kube: Kube, jobs: Packed) -> None:
        self.settings, self.kube, self.jobs = settings, kube, jobs
        self.items: dict[Key, dict[str, Any]] = {}
        self.pods: dict[Key, dict[str, dict[str, Any]]] = {}
        self.queue = WorkQueue(self.reconcile, base_delay=0.5, max_delay=settings.retry_max_delay)
        self.queue.wanted = lambda key: key in self.items
        self.probe = ProgressProbe(deadline=settings.progress_deadline)
        self._progress_at: dict[Key, float] = {}
        self._refused: dict[Key, ChildFailure] = {}

    def start(self) -> None:
        self.queue.start()
        for key in list(self.items):
            self.queue.add(key)

    async def stop(self) -> None:
        await self.queue.stop()

    # ------------------------------------------------------------------------------ watch events

    def on_prediction(self, event_type: str | None, body: dict[str, Any]) -> None:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if event_type == "DELETED":
            self.items.pop(key, None)
            self.pods.pop(key, None)
            self._progress_at.pop(key, None)
            self._refused.pop(key, None)
            self.queue.forget(key)
            return
        cached = self.items.get(key)
        body = slim(body)
        if (
            cached is None
            or resource_version(body) >= resource_version(cached)
            or body["metadata"]["uid"] != cached["metadata"]["uid"]
        ):
            self.items[key] = body
        self.queue.add(key)

    def on_pod(self, event_type: str | None, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        name = (meta.get("labels") or {}).get(LABEL_PREDICTION)
        if not name:
            return
        key = (meta["namespace"], name)
        pods = self.pods.setdefault(key, {})
        if event_type == "DELETED":
            pods.pop(meta["name"], None)
        else:
            pods[meta["name"]] = slim_pod(body)
        if key in self.items:
            self.queue.add(key)

    def on_job(self, namespace: str) -> None:
        """A TabularJob changed: the predictions of its namespace that wait on a model may go on."""
        for key in [k for k in self.items if k[0] == namespace]:
            self.queue.add(key)

    # ------------------------------------------------------------------------------ one pass

    def _observe(self, key: Key, tp: dict[str, Any], pods: list[dict[str, Any]]) -> PredictionObserved:
        meta = tp["metadata"]
        ref = JobRef(key[1], key[0], meta["uid"], int(meta.get("generation") or 1))
        desired: Callable[[int, int, str], dict[str, Any]] | None = None
        problems: list[str] = []
        try:
            parsed = parse_prediction({k: v for k, v in tp.items() if k != "status"})
            desired = functools.partial(_pod, parsed, ref, self.settings)
        except SpecError as exc:
            problems = exc.lines()
        job_name = ((tp.get("spec") or {}).get("model") or {}).get("job")
        model_job = self.jobs.get((key[0], job_name)) if job_name else None
        return PredictionObserved(
            tp=tp, pods=[p for p in pods if owner_uid(p) == meta["uid"]], now=datetime.now(UTC),
            settings=self.settings, desired=desired, spec_problems=problems, model_job=model_job,
            create_failure=self._refused.pop(key, None),
        )  # fmt: skip

    async def reconcile(self, key: Key) -> None:
        tp = self.items[key]
        obs = self._observe(key, tp, list(self.pods.get(key, {}).values()))
        if (tp.get("status") or {}).get("phase") == "Running":
            obs.progress = await self._progress(key, obs.pods)
        d = decide_prediction(obs)
        if d.list_pods:
            listed = await self.kube.list_pods(key[0], key[1])
            own = [slim_pod(p) for p in listed if (p["metadata"].get("labels") or {}).get(LABEL_PREDICTION)]
            self.pods[key] = {p["metadata"]["name"]: p for p in own}
            obs.pods, obs.pods_listed = [p for p in own if owner_uid(p) == tp["metadata"]["uid"]], True
            d = decide_prediction(obs)
        await self.execute(key, tp, d)

    async def _progress(self, key: Key, pods: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Each running pod's ScoringProgress, at most every `progress_interval`."""
        now = time.monotonic()
        if now - self._progress_at.get(key, 0.0) < self.settings.progress_interval:
            return {}
        self._progress_at[key] = now
        reads: dict[int, Any] = {}
        for pod in pods:
            ip = (pod.get("status") or {}).get("podIP")
            index = (pod["metadata"].get("labels") or {}).get(LABEL_INDEX)
            if not ip or index is None or not podstate.running(pod):
                continue
            reads[int(index)] = self.probe.read_body(ip, self.settings.progress_port)
        bodies = await asyncio.gather(*reads.values())
        out: dict[int, dict[str, Any]] = {}
        for index, body in zip(reads, bodies, strict=True):
            try:
                if body is not None:
                    out[index] = ScoringProgress.model_validate_json(body, by_name=False).model_dump()
            except ValidationError:
                continue
        return out

    async def execute(self, key: Key, tp: dict[str, Any], d: PredictionDecision) -> None:
        if d.delete_job:
            await self._call(
                "delete", tp, self.kube.custom.delete_namespaced_custom_object, propagation_policy="Background"
            )
            return
        for obj in d.create:
            try:
                await self.kube.create(obj)
            except ApiFailure as exc:
                if exc.status == 409:  # AlreadyExists: created by an earlier pass of ours (names are deterministic)
                    continue
                self._refused[key] = ChildFailure(exc.what, exc.status, exc.reason, exc.message)
                self.queue.retry(key)
                return
        if status_changed(tp.get("status"), d.status):
            try:
                body = {
                    "metadata": {"resourceVersion": tp["metadata"]["resourceVersion"]},
                    "status": merge_patch(tp.get("status") or {}, d.status),
                }
                resp = await self._call(
                    "patch", tp, self.kube.custom.patch_namespaced_custom_object_status, body,
                    _content_type="application/merge-patch+json", status=True,
                )  # fmt: skip
            except ApiFailure as exc:
                log.warning("%s/%s: status not written: %s", *key, exc)
                self.queue.retry(key)
                return
            if resource_version(resp) >= resource_version(self.items.get(key, resp)):
                self.items[key] = slim(resp)
            for ev in d.events:
                await self._event(tp, ev.type, ev.reason, ev.message)
        results = await asyncio.gather(
            *(self.kube.delete_pod(key[0], n) for n in d.delete_pods), return_exceptions=True
        )
        if any(isinstance(r, BaseException) for r in results):
            self.queue.retry(key)
        else:
            self.queue.succeeded(key)
        if d.requeue_after is not None:
            self.queue.after(key, d.requeue_after)
        if d.read_progress:
            self.queue.after(key, self.settings.progress_interval)

    async def _call(self, verb: str, tp: dict[str, Any], fn: Any, *body: Any, status: bool = False, **kw: Any) -> Any:
        meta = tp["metadata"]
        raw = await self.kube.call(
            verb, f"{PREDICTION_KIND}/{meta['name']}", fn, GROUP, VERSION, meta["namespace"], PREDICTION_PLURAL,
            meta["name"], *body, **kw,
        )  # fmt: skip
        return json.loads(raw) if status else None

    async def _event(self, tp: dict[str, Any], type_: str, reason: str, message: str) -> None:
        meta = tp["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": PREDICTION_KIND,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "firstTimestamp": now[:19] + "Z",
            "lastTimestamp": now[:19] + "Z",
            "eventTime": now,
            "count": 1,
            "source": {"component": "tabjob-operator"},
            "reportingComponent": "tabjob.dev/operator",
            "reportingInstance": self.settings.identity[:128],
            "action": reason,
        }
        try:
            await self.kube.call(
                "create", f"Event/{reason}", self.kube.core.create_namespaced_event, meta["namespace"], body
            )
        except ApiFailure as exc:  # events are best effort
            log.warning("event %s on %s not posted: %s", reason, meta["name"], exc)
