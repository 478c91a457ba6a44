"""A small in-process Kubernetes API server for the reconciler's failure paths: the real kubernetes client and the
real reconciler talk HTTP to it, and a test tells it to refuse, fail or stall chosen requests.

It speaks just enough of the API (create, get, list by label, replace, delete; status as a subresource with
resourceVersion preconditions; Leases) for one operator's requests, and records every request it answered.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from kubernetes import client

PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+))?(?P<status>/status)?$"
)


@dataclass
class Fault:
    method: str
    pattern: str  # matched against the path with re.search
    code: int = 500
    reason: str = "InternalError"
    message: str = "injected"
    delay: float = 0.0  # answer after this long (with `code` 0: then serve normally)
    times: int = -1  # how many requests it hits; -1: all
    when: Callable[[dict[str, Any]], bool] | None = None  # only requests whose JSON body matches


class FakeApiServer:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.faults: list[Fault] = []
        self.log: list[tuple[str, str, int]] = []  # (method, path, answered code)
        self.connections: set[Any] = set()  # client (host, port) pairs: one per TCP connection the clients opened
        self._rv = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ------------------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeApiServer:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner:
            await self._runner.cleanup()

    def api_client(self) -> client.ApiClient:
        conf = client.Configuration()
        conf.host = f"http://127.0.0.1:{self.port}"
        return client.ApiClient(conf)

    # ------------------------------------------------------------------------------ test helpers

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["resourceVersion"] = str(next(self._rv))
        meta.setdefault("creationTimestamp", "2025-01-01T00:00:00Z")
        self.objects[(plural, meta.get("namespace", "ns"), meta["name"])] = obj
        return obj

    def get(self, plural: str, name: str, ns: str = "ns") -> dict[str, Any] | None:
        return self.objects.get((plural, ns, name))

    def names(self, plural: str) -> list[str]:
        return sorted(name for (p, _, name) in self.objects if p == plural)

    def count(self, method: str, pattern: str) -> int:
        return sum(1 for m, path, _ in self.log if m == method and re.search(pattern, path))

    # ------------------------------------------------------------------------------ serving

    @staticmethod
    def _status(code: int, reason: str, message: str) -> web.Response:
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": message}
        return web.json_response({**body, "code": code}, status=code)

    async def _handle(self, request: web.Request) -> web.Response:
        if request.transport is not None:
            self.connections.add(request.transport.get_extra_info("peername"))
        body: dict[str, Any] = {}
        if request.can_read_body:
            body = json.loads(await request.read() or b"{}")
        resp = await self._answer(request, body)
        self.log.append((request.method, request.path, resp.status))
        return resp

    async def _answer(self, request: web.Request, body: dict[str, Any]) -> web.Response:
        for fault in self.faults:
            if fault.method != request.method or not re.search(fault.pattern, request.path):
                continue
            if fault.when is not None and not fault.when(body):
                continue
            if fault.times == 0:
                continue
            fault.times -= 1
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.code:
                return self._status(fault.code, fault.reason, fault.message)
            break
        m = PATH.match(request.path)
        if not m:
            return self._status(404, "NotFound", f"no route {request.path}")
        plural, ns, name = m["plural"], m["ns"], m["name"]
        key = (plural, ns, name or "")
        if request.method == "POST":
            meta = body.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            meta["namespace"] = ns
            if (plural, ns, meta["name"]) in self.objects:
                return self._status(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists')
            return web.json_response(self.put(plural, body), status=201)
        if request.method == "GET" and name is None:
            selector = request.query.get("labelSelector", "")
            want = dict(kv.split("=", 1) for kv in selector.split(",") if "=" in kv)
            items = [
                o
                for (p, n, _), o in self.objects.items()
                if p == plural and n == ns and all(o["metadata"].get("labels", {}).get(k) == v for k, v in want.items())
            ]
            return web.json_response({"kind": "List", "metadata": {"resourceVersion": "1"}, "items": items})
        stored = self.objects.get(key)
        if stored is None:
            return self._status(404, "NotFound", f'{plural} "{name}" not found')
        if request.method == "GET":
            return web.json_response(stored)
        if request.method == "DELETE":
            del self.objects[key]
            return web.json_response({"kind": "Status", "status": "Success"})
        if request.method == "PUT":
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv and rv != stored["metadata"]["resourceVersion"]:
                return self._status(409, "Conflict", "the object has been modified")
            if m["status"]:
                updated = {**stored, "status": body.get("status")}
            else:
                updated = {**body, "metadata": {**stored["metadata"], **body.get("metadata", {})}}
            return web.json_response(self.put(plural, updated))
        if request.method == "PATCH" and request.content_type == "application/merge-patch+json":
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv and rv != stored["metadata"]["resourceVersion"]:
                return self._status(409, "Conflict", "the object has been modified")
            if m["status"]:
                updated = {**stored, "status": apply_merge_patch(stored.get("status") or {}, body.get("status") or {})}
            else:
                updated = apply_merge_patch(stored, body)
            return web.json_response(self.put(plural, updated))
        return self._status(405, "MethodNotAllowed", request.method)


def apply_merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386, as the API server applies a merge patch."""
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            current = out.get(k)
            out[k] = apply_merge_patch(current if isinstance(current, dict) else {}, v)
        else:
            out[k] = v
    return out
