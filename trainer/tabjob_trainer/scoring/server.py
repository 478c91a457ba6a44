"""A scoring pod's progress endpoint: its `ScoringProgress` as JSON on GET, for the operator's status."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tabjob.contracts import pod as contract
from tabjob.contracts.scoring import ScoringProgress


def serve(port: int, snapshot: Callable[[], ScoringProgress]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = snapshot().to_json().encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return

    # The pod's own address where known (pods that share a host on the test bed share the port too).
    server = ThreadingHTTPServer((contract.POD_IP.get() or "", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="tabjob-scoring-progress", daemon=True).start()
    return server
