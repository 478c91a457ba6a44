"""The part of the kubelet API the API server calls for `kubectl logs`: GET /containerLogs/<ns>/<pod>/<container>.

Served over TLS with a certificate from the cluster CA (the API server runs with --kubelet-certificate-authority)
and requiring the API server's client certificate. Supports follow, tailLines, limitBytes and previous.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from tests.cluster.paths import PKI

# (namespace, pod, container, previous) -> (log file, is the container still running?)
LogLookup = Callable[[str, str, str, bool], tuple[Path, Callable[[], bool]] | None]


class _Handler(BaseHTTPRequestHandler):
    lookup: LogLookup
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes, which suits a followed stream

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        url = urlparse(self.path)
        parts = url.path.strip("/").split("/")
        if url.path in ("/healthz", "/readyz"):
            self._reply(200, b"ok")
            return
        if len(parts) != 4 or parts[0] != "containerLogs":
            self._reply(404, b"tests/cluster node agent serves only /containerLogs and /healthz")
            return
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        found = self.lookup(parts[1], parts[2], parts[3], q.get("previous") == "true")
        if found is None:
            self._reply(404, f"container {parts[3]} of pod {parts[1]}/{parts[2]} not found here".encode())
            return
        path, running = found
        data = path.read_bytes() if path.exists() else b""
        if "tailLines" in q:
            lines = data.splitlines(keepends=True)
            n = int(q["tailLines"])
            data = b"".join(lines[-n:]) if n > 0 else b""
        limit = int(q["limitBytes"]) if "limitBytes" in q else None
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        sent = self._send(data, limit, 0)
        if q.get("follow") == "true":
            self._follow(path, running, len(path.read_bytes()) if path.exists() else 0, limit, sent)

    def _send(self, data: bytes, limit: int | None, sent: int) -> int:
        if limit is not None:
            data = data[: max(0, limit - sent)]
        self.wfile.write(data)
        self.wfile.flush()
        return sent + len(data)

    def _follow(self, path: Path, running: Callable[[], bool], offset: int, limit: int | None, sent: int) -> None:
        while limit is None or sent < limit:
            alive = running()
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            offset += len(chunk)
            if chunk:
                try:
                    sent = self._send(chunk, limit, sent)
                except OSError:
                    return  # the client went away
            elif not alive:
                return
            time.sleep(0.2)

    def _reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(port: int, lookup: LogLookup) -> ThreadingHTTPServer:
    handler = type("Handler", (_Handler,), {"lookup": staticmethod(lookup)})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(PKI / "kubelet.crt"), str(PKI / "kubelet.key"))
    ctx.load_verify_locations(str(PKI / "ca.crt"))
    ctx.verify_mode = ssl.CERT_REQUIRED  # only the API server (kubelet-client cert) may read logs
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name=f"kubelet-{port}", daemon=True).start()
    return server
