"""Progress a person or the operator can watch while a job runs.

Every event is one ``results.FitEvent``, and ``Progress`` hands it to its sinks, one small class each:

- ``JsonlFile``: appends the line to ``progress.jsonl`` in the output directory (one ``write`` per line with
  O_APPEND, so ranks on one machine share the file safely);
- ``Stdout``: the same line on standard output, so a trainer pod's log (``kubectl logs``, ``tabjob logs``) shows
  its fits as they start, end or fail;
- ``Counters``: fits ended by state, in torchrun's rendezvous store (a TCPStore at MASTER_ADDR:MASTER_PORT) so
  rank 0 knows the whole job's progress without a shared volume; rank 0 serves them as JSON on
  ``TABJOB_PROGRESS_PORT`` (a ``results.ProgressSnapshot``);
- ``PrometheusMetrics``: with ``TABJOB_METRICS_PORT`` every rank serves its own Prometheus metrics.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from tabjob.contracts import pod
from tabjob.contracts.results import PROGRESS_FILE, DataSummary, FitEvent, ProgressSnapshot, RunSummary
from tabjob_trainer.record import FitRecord

# What the counters count: a fit ended in one of these states, or was resumed from an earlier attempt.
_COUNTED = ("Succeeded", "Failed", "Skipped", "Resumed")


class Sink(Protocol):
    def emit(self, event: FitEvent, line: bytes) -> None: ...

    def close(self) -> None: ...


class JsonlFile:
    """progress.jsonl: one append per line, whole lines even with several ranks writing."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def emit(self, event: FitEvent, line: bytes) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def close(self) -> None:
        return


class Stdout:
    """The pod's log. One write, so the lines of ranks sharing a pod's log stay whole."""

    def emit(self, event: FitEvent, line: bytes) -> None:
        with contextlib.suppress(OSError):  # a closed stdout costs only the log
            os.write(1, line)

    def close(self) -> None:
        return


def _counted(event: FitEvent) -> str | None:
    if event.event == "FitEnded":
        return event.state
    return "Resumed" if event.event == "FitResumed" else None


class Counters:
    """Fits ended, by state: the job's in the rendezvous store when there is one, else this rank's own."""

    def __init__(self) -> None:
        self.best: FitEvent | None = None  # this rank's best succeeded fit by validation score
        self._local = dict.fromkeys(_COUNTED, 0)
        self._lock = threading.Lock()
        self._store = _connect_store()

    def emit(self, event: FitEvent, line: bytes) -> None:
        state = _counted(event)
        if state is None:
            return
        with self._lock:
            self._local[state] += 1
            score, best = event.score_val, self.best.score_val if self.best else None
            if state == "Succeeded" and score is not None and (best is None or score > best):
                self.best = event
        if self._store is not None:
            self._store.add(f"tabjob/{state}", 1)

    def counts(self) -> dict[str, int]:
        if self._store is not None:
            try:
                return {k: int(self._store.add(f"tabjob/{k}", 0)) for k in _COUNTED}
            except Exception:  # the store goes away when torchrun's agent exits
                pass
        with self._lock:
            return dict(self._local)

    def close(self) -> None:
        self._store = None


class PrometheusMetrics:
    """This rank's metrics on its own port, where the PodMonitor scrapes the named port."""

    def __init__(self, port: int) -> None:
        from prometheus_client import start_http_server

        self._metrics = _prometheus()
        self._server: Any = start_http_server(port, addr=_bind_address() or "0.0.0.0")[0]

    def emit(self, event: FitEvent, line: bytes) -> None:
        state = _counted(event)
        if state is None:
            return
        self._metrics["fits"].labels(state=state).inc()
        if event.seconds is not None:
            self._metrics["seconds"].observe(event.seconds)
        if event.rows_per_second:
            self._metrics["rows"].set(event.rows_per_second)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class Progress:
    """This rank's events, each written once as a FitEvent and handed to every sink."""

    def __init__(self, out: Path, rank: int, total: int) -> None:
        self.rank = rank
        self.total = total
        self.counters = Counters()
        self.sinks: list[Sink] = [JsonlFile(out / PROGRESS_FILE), Stdout(), self.counters]
        port = metrics_port(rank)
        if port is not None:
            # Every rank serves its own metrics (TABJOB_METRICS_PORT, plus the rank's place in its pod when a pod
            # holds several ranks) on the pod's address.
            self.sinks.append(PrometheusMetrics(port))
        self._server: ThreadingHTTPServer | None = None

    def emit(self, event: FitEvent) -> None:
        line = event.line()  # encoded once for every sink
        for sink in self.sinks:
            sink.emit(event, line)

    def _event(self, **fields: Any) -> None:
        self.emit(FitEvent(t=round(time.time(), 3), rank=self.rank, **fields))

    def job_started(self, resumed: int, world: int, data: DataSummary) -> None:
        self._event(event="JobStarted", fits=self.total, resumed=resumed, world=world, data=data)

    def fit_started(self, fit: str, model: str) -> None:
        self._event(event="FitStarted", fit=fit, model=model)

    def fit_resumed(self, fit: str, model: str) -> None:
        self._event(event="FitResumed", fit=fit, model=model)

    def fit_ended(self, rec: FitRecord) -> None:
        self._event(
            event="FitEnded",
            fit=rec.id,
            model=rec.model,
            state=rec.state,
            seconds=rec.fit_time if rec.succeeded else None,
            score_val=rec.score_val,
            device=rec.device or None,
            fallback=rec.fallback,
            rows_per_second=rec.rows_per_second,
            message=rec.message,
        )

    def job_ended(self, summary: RunSummary) -> None:
        self._event(event="JobEnded", best_model=summary.best_model, score=summary.score)

    def snapshot(self) -> ProgressSnapshot:
        """What the operator reads for status.progress (bestScore: the best single fit's validation score)."""
        c = self.counters.counts()
        best = self.counters.best
        return ProgressSnapshot(
            fits_total=self.total,
            fits_done=c["Succeeded"] + c["Resumed"],
            fits_failed=c["Failed"],
            fits_skipped=c["Skipped"],
            best_score=best.score_val if best else None,
            best_model=best.model if best else None,
        )

    def serve(self) -> None:
        """Rank 0: JSON progress on TABJOB_PROGRESS_PORT (every rank serves its metrics from the constructor)."""
        port = pod.PROGRESS.get()
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
        for sink in self.sinks:
            sink.close()


def metrics_port(rank: int) -> int | None:
    """This rank's metrics port: TABJOB_METRICS_PORT for a pod's first rank, the next ports for its others."""
    base = pod.METRICS.get()
    if not base:
        return None
    return int(base) + pod.LOCAL_RANK.get_int(0)


def _bind_address() -> str:
    return pod.POD_IP.get() or ""


def _connect_store() -> Any:
    addr, port = pod.MASTER_ADDR.get(), pod.MASTER_PORT.get()
    if not addr or not port or pod.WORLD_SIZE.get_int(1) < 2:
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
