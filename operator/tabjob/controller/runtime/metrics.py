"""Prometheus metrics of the operator (the trainer exports its own fit metrics on rank 0)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

JOBS = Gauge("tabjob_jobs", "TabularJobs the operator knows, by phase.", ["phase"])
TRANSITIONS = Counter("tabjob_phase_transitions_total", "Phase transitions.", ["from_phase", "to_phase"])
RECONCILE_SECONDS = Histogram(
    "tabjob_reconcile_duration_seconds",
    "Time one reconcile of one job takes, API calls included.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
RECONCILE_ERRORS = Counter("tabjob_reconcile_errors_total", "Reconciles that raised (retried with back-off).")
TIME_TO_RUNNING = Histogram(
    "tabjob_time_to_all_pods_running_seconds",
    "From the TabularJob's creation to all of its pods running.",
    buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800),
)
GPUS_REQUESTED = Gauge("tabjob_gpus_requested", "Whole GPUs requested by the pods of unfinished jobs.")
API_REQUESTS = Counter("tabjob_api_requests_total", "Kubernetes API requests the reconciler made.", ["verb", "code"])
RETRIES = Counter("tabjob_group_retries_total", "Times a torchrun group was recreated after a failure.")


class PhaseBook:
    """Phase and GPUs per job, so the gauges are exact without scanning every job on every reconcile."""

    def __init__(self) -> None:
        self._phase: dict[str, str] = {}
        self._gpus: dict[str, int] = {}

    def update(self, key: str, phase: str | None, gpus: int) -> None:
        old = self._phase.get(key)
        if phase != old:
            if old:
                JOBS.labels(old).dec()
            if phase:
                JOBS.labels(phase).inc()
                self._phase[key] = phase
            if old and phase:
                TRANSITIONS.labels(old, phase).inc()
        active = phase in ("Pending", "Running")
        self._gpus[key] = gpus if active else 0
        GPUS_REQUESTED.set(sum(self._gpus.values()))

    def forget(self, key: str) -> None:
        old = self._phase.pop(key, None)
        if old:
            JOBS.labels(old).dec()
        self._gpus.pop(key, None)
        GPUS_REQUESTED.set(sum(self._gpus.values()))


LEADER = Gauge("tabjob_leader", "1 while this replica holds the leader Lease (or runs without election), else 0.")
