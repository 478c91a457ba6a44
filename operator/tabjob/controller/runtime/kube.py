"""The Kubernetes adapter: every API call the reconciler makes, rate limited, counted and classified.

Errors come back as `ApiFailure`, classified once here so that the reconciler never guesses: a *retryable* failure
(the API server is busy, restarting or slow) is retried with exponential back-off and jitter; a *terminal* one (the
object is invalid, too large, or forbidden by RBAC or a quota) will fail the same way until someone changes the job,
so it becomes a condition and an Event instead of a retry.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client

from tabjob.api import GROUP, LABEL_JOB, PLURAL, VERSION
from tabjob.controller.runtime import metrics

# 409 is handled by each caller (AlreadyExists on create, Conflict on update); 404 likewise.
RETRYABLE = frozenset({0, 408, 425, 429, 500, 502, 503, 504})
API_TIMEOUT = 30.0  # seconds: one request's total (connect, read) limit; a stuck API call must not hold a worker


@dataclass(frozen=True)
class ApiFailure(Exception):
    """A refused or failed API call, with the server's own message (the part a person can act on)."""

    verb: str
    what: str  # kind/name
    status: int  # HTTP status; 0 when no answer came back
    reason: str  # Kubernetes' reason (Invalid, Forbidden, RequestEntityTooLarge...) or the exception's name
    message: str

    @property
    def retryable(self) -> bool:
        return self.status in RETRYABLE

    def __str__(self) -> str:
        return f"{self.verb} {self.what}: {self.status or ''} {self.reason}: {self.message}".replace("  ", " ")


def failure_from(verb: str, what: str, exc: BaseException) -> ApiFailure:
    if isinstance(exc, client.ApiException):
        reason, message = str(exc.reason or ""), ""
        try:
            doc = json.loads(exc.body or "{}")
            reason = str(doc.get("reason") or reason)
            message = str(doc.get("message") or "")
        except (TypeError, ValueError):
            message = str(exc.body or "")[:500]
        return ApiFailure(verb, what, int(exc.status or 0), reason, message or reason)
    return ApiFailure(verb, what, 0, type(exc).__name__, str(exc)[:500])


def merge_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The RFC 7386 merge patch that turns `old` into `new`: removed keys become null, maps are diffed key by key,
    anything else (lists included) is replaced whole."""
    patch: dict[str, Any] = {k: None for k in old if k not in new}
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(old.get(k), dict):
            sub = merge_patch(old[k], v)
            if sub:
                patch[k] = sub
        elif k not in old or old[k] != v:
            patch[k] = v
    return patch


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


_METHOD = {"Pod": "pod", "Service": "service", "ConfigMap": "config_map"}


class Kube:
    """Blocking client calls on a bounded thread pool (the kubernetes client is synchronous), raw JSON in and out:
    deserialising into client models costs more CPU than the request itself."""

    def __init__(self, api_client: Any, qps: float, burst: int, workers: int = 8) -> None:
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tabjob-api")
        self.bucket = TokenBucket(qps, burst)

    async def call(self, verb: str, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> bytes:
        """The response body of one request, raw. The body is always read to its end, even where the caller does
        not want it: urllib3 returns a connection to its pool only then, and an unread response costs a new TLS
        connection (a handshake on both sides) for the next request."""
        await self.bucket.take()
        loop = asyncio.get_running_loop()
        kwargs.setdefault("_request_timeout", API_TIMEOUT)

        def request() -> bytes:
            resp = fn(*args, _preload_content=False, **kwargs)
            try:
                return cast(bytes, resp.data)
            finally:
                resp.release_conn()

        try:
            result = await loop.run_in_executor(self.pool, request)
        except Exception as exc:  # every failure is classified, none escapes unnamed
            failure = failure_from(verb, what, exc)
            metrics.API_REQUESTS.labels(verb, str(failure.status)).inc()
            raise failure from None
        metrics.API_REQUESTS.labels(verb, "200").inc()
        return result

    @staticmethod
    def _json(data: bytes) -> dict[str, Any]:
        return cast(dict[str, Any], json.loads(data))

    # ------------------------------------------------------------------------------ children

    async def create(self, obj: dict[str, Any]) -> None:
        ns, kind, name = obj["metadata"]["namespace"], obj["kind"], obj["metadata"]["name"]
        fn = getattr(self.core, f"create_namespaced_{_METHOD[kind]}")
        await self.call("create", f"{kind}/{name}", fn, ns, obj)

    async def get(self, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        fn = getattr(self.core, f"read_namespaced_{_METHOD[kind]}")
        try:
            return self._json(await self.call("get", f"{kind}/{name}", fn, name, ns))
        except ApiFailure as failure:
            if failure.status == 404:
                return None
            raise

    async def update(self, obj: dict[str, Any]) -> None:
        """Bring an existing child to `obj` (the plan ConfigMap of a new generation) with a merge patch of its
        labels, annotations and data: the `patch` verb, never `update`."""
        ns, kind, name = obj["metadata"]["namespace"], obj["kind"], obj["metadata"]["name"]
        fn = getattr(self.core, f"patch_namespaced_{_METHOD[kind]}")
        meta = {k: obj["metadata"][k] for k in ("labels", "annotations") if k in obj["metadata"]}
        body = {"metadata": meta, **{k: v for k, v in obj.items() if k in ("data", "spec")}}
        await self.call(
            "patch", f"{kind}/{name}", fn, name, ns, body, _content_type="application/merge-patch+json",
        )  # fmt: skip

    async def delete_pod(self, ns: str, name: str, grace: int = 5) -> None:
        try:
            await self.call(
                "delete",
                f"Pod/{name}",
                self.core.delete_namespaced_pod,
                name,
                ns,
                grace_period_seconds=grace,
            )
        except ApiFailure as failure:
            if failure.status != 404:
                raise

    async def list_pods(self, ns: str, job: str) -> list[dict[str, Any]]:
        resp = await self.call(
            "list", f"Pod/{LABEL_JOB}={job}", self.core.list_namespaced_pod, ns,
            label_selector=f"{LABEL_JOB}={job}",
        )  # fmt: skip
        return cast(list[dict[str, Any]], self._json(resp)["items"])

    async def list_pod_events(self, ns: str, reason: str) -> list[dict[str, Any]]:
        """The namespace's Events of `reason` about pods (the server filters them)."""
        resp = await self.call(
            "list", f"Event/{reason}", self.core.list_namespaced_event, ns,
            field_selector=f"involvedObject.kind=Pod,reason={reason}",
        )  # fmt: skip
        return cast(list[dict[str, Any]], self._json(resp)["items"])

    # ------------------------------------------------------------------------------ the TabularJob

    async def patch_status(self, job: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of /status from the cached status to `status`, with the cached resourceVersion as a
        precondition: a status computed from a stale cache is refused with 409 Conflict, an invalid one with 422,
        and the two never look alike (a JSON-patch `test` failure is a 422 too)."""
        meta = job["metadata"]
        body = {
            "metadata": {"resourceVersion": meta["resourceVersion"]},
            "status": merge_patch(job.get("status") or {}, status),
        }
        resp = await self.call(
            "patch", f"TabularJob/{meta['name']}", self.custom.patch_namespaced_custom_object_status,
            GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], body,
            _content_type="application/merge-patch+json",
        )  # fmt: skip
        return self._json(resp)

    async def get_job(self, ns: str, name: str) -> dict[str, Any] | None:
        try:
            resp = await self.call(
                "get", f"TabularJob/{name}", self.custom.get_namespaced_custom_object,
                GROUP, VERSION, ns, PLURAL, name,
            )  # fmt: skip
        except ApiFailure as failure:
            if failure.status == 404:
                return None
            raise
        return self._json(resp)

    async def delete_job(self, ns: str, name: str) -> None:
        try:
            await self.call(
                "delete", f"TabularJob/{name}", self.custom.delete_namespaced_custom_object,
                GROUP, VERSION, ns, PLURAL, name, propagation_policy="Background",
            )  # fmt: skip
        except ApiFailure as failure:
            if failure.status != 404:
                raise

    async def post_event(self, job: dict[str, Any], type_: str, reason: str, message: str, instance: str) -> None:
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
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "firstTimestamp": now[:19] + "Z",
            "lastTimestamp": now[:19] + "Z",
            "eventTime": now,
            "count": 1,
            "source": {"component": "tabjob-operator"},
            "reportingComponent": "tabjob.dev/operator",
            "reportingInstance": instance[:128],
            "action": reason,
        }
        await self.call(
            "create", f"Event/{reason}", self.core.create_namespaced_event, meta["namespace"], body,
        )  # fmt: skip
