"""A misbehaving store for the fault tests: an HTTP proxy in front of the real S3 server (tests/s3fixtures.py).

It forwards each request unchanged (the Host header too, so the client's signature still holds) and counts them, but
can answer the first `fail` requests itself with `status` (503 SlowDown by default) or, with `hang`, accept every
request and never answer, as a store whose disks or network have stalled does.

    with FaultyProxy(server.endpoint, fail=2) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        ...
        assert proxy.failed == 2
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlparse

# Per-connection headers a proxy must not pass on (RFC 9110 7.6.1); the body is re-sent with its own length.
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
_SLOW_DOWN = (
    b"<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>SlowDown</Code>"
    b"<Message>Please reduce your request rate.</Message></Error>"
)


class FaultyProxy:
    def __init__(self, upstream: str, fail: int = 0, status: int = 503, hang: bool = False) -> None:
        self.upstream = urlparse(upstream)
        self.fail, self.status, self.hang = fail, status, hang
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status answered)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def failed(self) -> int:
        """How many requests the proxy answered with its fault."""
        with self._lock:
            return sum(1 for _, _, status in self.requests if status == self.status)

    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def reset(self, fail: int = 0) -> None:
        with self._lock:
            self.requests.clear()
            self.fail = fail

    def __enter__(self) -> FaultyProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def _next(self, method: str, path: str) -> str:
        """What to do with the next request: "hang", "fail" or "forward"."""
        with self._lock:
            failing = len(self.requests) < self.fail
            verdict = "hang" if self.hang else "fail" if failing else "forward"
            self.requests.append((method, path, self.status if verdict == "fail" else 0))
            return verdict

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                verdict = proxy._next(self.command, self.path)
                if verdict == "hang":
                    proxy._stopped.wait()
                    self.close_connection = True
                    return
                if verdict == "fail":
                    self._answer(proxy.status, "application/xml", _SLOW_DOWN, {})
                    return
                status, headers, data = self._forward(body)
                self._answer(status, headers.pop("content-type", ""), data, headers)

            def _forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
                up = http.client.HTTPConnection(proxy.upstream.hostname or "127.0.0.1", proxy.upstream.port, timeout=60)
                try:
                    up.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for key, value in self.headers.items():
                        if key.lower() not in _HOP:
                            up.putheader(key, value)
                    up.endheaders(body or None)
                    response = up.getresponse()
                    data = response.read()
                    headers = {k.lower(): v for k, v in response.getheaders() if k.lower() not in _HOP}
                    return response.status, headers, data
                finally:
                    up.close()

            def _answer(self, status: int, content_type: str, data: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                length = headers.pop("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                if content_type:
                    self.send_header("Content-Type", content_type)
                # A HEAD answer carries the object's length, not a body's.
                self.send_header("Content-Length", length if self.command == "HEAD" else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _any

        return Handler
