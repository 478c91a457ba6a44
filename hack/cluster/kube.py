"""A small JSON client for the test cluster's API server (plain HTTPS with the kubeconfig's client certificate).

The harness speaks the REST API directly rather than through the generated `kubernetes` client: it needs raw
dicts, explicit patch content types (merge patch for pod status) and line-by-line watches, all of which are
short with `requests` and stay independent of the generated client's version.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class ApiError(RuntimeError):
    def __init__(self, status: int, body: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {body[:500]}")
        self.status = status


class Kube:
    def __init__(
        self, server: str, ca: str, cert: str | None = None, key: str | None = None, token: str | None = None
    ) -> None:
        self.server = server.rstrip("/")
        self.session = requests.Session()
        # Not trust_env: REQUESTS_CA_BUNDLE in the environment would otherwise replace this CA.
        self.session.trust_env = False
        self.session.verify = ca
        if cert and key:
            self.session.cert = (cert, key)
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Kube:
        cfg = json.loads(path.read_text())  # written by controlplane.write_kubeconfig as JSON
        cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        return cls(cluster["server"], cluster["certificate-authority"], user["client-certificate"], user["client-key"])

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: dict[str, Any] | None = None,
        ok_missing: bool = False,
        timeout: float = 30,
    ) -> Any:
        data = None if body is None else json.dumps(body)
        resp = self.session.request(
            method,
            self.server + path,
            data=data,
            params=params,
            timeout=timeout,
            headers={"Content-Type": content_type} if data else None,
        )
        if ok_missing and resp.status_code == 404:
            return None
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, resp.text, f"{method} {path}")
        if not resp.content:
            return None
        # /readyz, /healthz and logs answer text/plain
        return resp.json() if resp.headers.get("Content-Type", "").startswith("application/json") else resp.text

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def create(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def patch(self, path: str, body: Any, content_type: str = STRATEGIC) -> Any:
        return self.request("PATCH", path, body, content_type=content_type)

    def delete(self, path: str, body: Any = None) -> Any:
        return self.request("DELETE", path, body, ok_missing=True)

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300) -> Iterator[dict[str, Any]]:
        """Yield watch events ({"type", "object"}) until the server closes the stream."""
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
            "allowWatchBookmarks": "true",
        }
        with self.session.get(self.server + path, params=params, stream=True, timeout=timeout_seconds + 30) as r:
            if r.status_code >= 400:
                raise ApiError(r.status_code, r.text, f"WATCH {path}")
            for line in r.iter_lines():
                if line:
                    yield json.loads(line)
