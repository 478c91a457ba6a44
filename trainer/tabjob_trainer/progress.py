"""Progress a person or the operator can watch while a job runs.

Every rank appends events to ``progress.jsonl`` in its output directory (one ``write`` per line with O_APPEND,
so ranks on one machine share the file safely), and writes the same line to its standard output, so a trainer
pod's log (``kubectl logs``, ``tabjob logs``) shows its fits as they start, end or fail. Counters live in
torchrun's rendezvous store (a TCPStore at MASTER_ADDR:MASTER_PORT) so rank 0 knows the whole job's progress
without a shared volume; rank 0 serves them as JSON on ``TABJOB_PROGRESS_PORT`` (a
``results_model.ProgressSnapshot``). With ``TABJOB_METRICS_PORT`` every rank serves its own Prometheus metrics.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tabjob.results_model import ProgressSnapshot

PROGRESS_FILE = "progress.jsonl"
_COUNTERS = ("done", "failed", "skipped", "resumed")


class Progress:
    def __init__(self, out: Path, rank: int, total: int) -> None:
        self.path = out / PROGRESS_FILE
        self.rank = rank
        self.total = total
        self.best: dict[str, Any] = {}
        self._local = dict.fromkeys(_COUNTERS, 0)
        self._lock = threading.Lock()
        self._store = _connect_store()
        self._server: ThreadingHTTPServer | None = None
        self._metrics_server: Any = None
        self._metrics: dict[str, Any] | None = None
        port = metrics_port(rank)
        if port is not None:
            # Every rank serves its own metrics (TABJOB_METRICS_PORT, plus the rank's place in its pod when a pod
            # holds several ranks) on the pod's address, where the PodMonitor scrapes the named port.
            from prometheus_client import start_http_server

            self._metrics = _prometheus()
            self._metrics_server, _ = start_http_server(port, addr=_bind_address() or "0.0.0.0")

    def event(self, kind: str, **fields: Any) -> None:
        line = (json.dumps({"t": round(time.time(), 3), "event": kind, "rank": self.rank, **fields}) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        # One write, so the lines of ranks sharing a pod's log stay whole; a closed stdout costs only the log.
        with contextlib.suppress(OSError):
            os.write(1, line)
        state = kind.removeprefix("fit_")
        if state in _COUNTERS:
            with self._lock:
                self._local[state] += 1
            if self._store is not None:
                self._store.add(f"tabjob/{state}", 1)
            if self._metrics is not None:
                self._metrics["fits"].labels(state=state).inc()
                if "seconds" in fields:
                    self._metrics["seconds"].observe(fields["seconds"])
                if fields.get("rows_per_second"):
                    self._metrics["rows"].set(fields["rows_per_second"])
        score = fields.get("score")
        if state == "done" and score is not None and (not self.best or score > self.best["score"]):
            self.best = {"fit": fields.get("fit"), "model": fields.get("model"), "score": score}

    def counts(self) -> dict[str, int]:
        if self._store is not None:
            try:
                return {k: int(self._store.add(f"tabjob/{k}", 0)) for k in _COUNTERS}
            except Exception:  # the store goes away when torchrun's agent exits
                pass
        with self._lock:
            return dict(self._local)

    def snapshot(self) -> ProgressSnapshot:
        """What the operator reads for status.progress (bestScore: the best single fit's validation score)."""
        c = self.counts()
        return ProgressSnapshot(
            fits_total=self.total,
            fits_done=c["done"] + c["resumed"],
            fits_failed=c["failed"],
            fits_skipped=c["skipped"],
            best_score=self.best.get("score"),
            best_model=self.best.get("model"),
        )

    def serve(self) -> None:
        """Rank 0: JSON progress on TABJOB_PROGRESS_PORT (every rank serves its metrics from the constructor)."""
        port = os.environ.get("TABJOB_PROGRESS_PORT")
        if port:
            progress = self

            class Handler(BaseHTTPRequestHandler):
                def do_GET(self) -> None:
                    body = progress.snapshot().to_json().encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

                def log_message(self, *args: Any) -> None:
                    return

            # The pod's own address where known: pods that share a host (tests/cluster) then share the port too.
            self._server = ThreadingHTTPServer((_bind_address(), int(port)), Handler)
            self._server.daemon_threads = True
            threading.Thread(target=self._server.serve_forever, name="tabjob-progress", daemon=True).start()

    def close(self) -> None:
        """Stop serving and let go of the store, while the interpreter is fully alive (not at its shutdown)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None
        self._store = None


def metrics_port(rank: int) -> int | None:
    """This rank's metrics port: TABJOB_METRICS_PORT for a pod's first rank, the next ports for its others."""
    base = os.environ.get("TABJOB_METRICS_PORT")
    if not base:
        return None
    local = int(os.environ.get("LOCAL_RANK", "0"))
    return int(base) + local


def _bind_address() -> str:
    return os.environ.get("POD_IP") or ""


def _connect_store() -> Any:
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not addr or not port or int(os.environ.get("WORLD_SIZE", "1")) < 2:
        return None
    try:
        import torch.distributed as dist

        return dist.TCPStore(addr, int(port), is_master=False, timeout=timedelta(seconds=30))
    except Exception:  # counters then stay per rank; the progress file still has every event
        return None


@functools.cache  # one set per process: the default registry refuses a second metric of the same name
def _prometheus() -> dict[str, Any]:
    from prometheus_client import Counter, Gauge, Histogram

    return {
        "fits": Counter("tabjob_trainer_fits", "Fits finished on this rank, by state", ["state"]),
        "seconds": Histogram(
            "tabjob_trainer_fit_seconds",
            "Seconds per fit",
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
        ),
        "rows": Gauge("tabjob_trainer_rows_per_second", "Training rows per second of the last fit"),
    }


def read_events(out: Path) -> list[dict[str, Any]]:
    path = out / PROGRESS_FILE
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written right now
            continue
    return events
