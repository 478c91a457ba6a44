"""Operator settings: defaults that belong to an installation rather than to one TabularJob.

The one place the operator reads its environment (what a Helm chart sets); `tabjob operator`'s flags override
fields of it, and the reconciler, the builders and every policy (through `Observed.settings`) read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from tabjob.contracts import pod

DEFAULT_IMAGE = pod.TRAINER_IMAGE


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "") in ("1", "true")


@dataclass(frozen=True)
class Settings:
    """What the builders and the reconciler need besides the TabularJob itself."""

    # The trainer image when spec.image is empty.
    default_image: str = field(default_factory=lambda: os.environ.get("TABJOB_TRAINER_IMAGE", DEFAULT_IMAGE))
    image_pull_policy: str = field(default_factory=lambda: os.environ.get("TABJOB_IMAGE_PULL_POLICY", "IfNotPresent"))
    # torchrun's c10d store on pod 0, and the trainer's progress endpoint on rank 0.
    # The operator's two port settings have the names of the pods' variables they become.
    rendezvous_port: int = field(default_factory=lambda: _env_int("TABJOB_RENDEZVOUS_PORT", pod.RENDEZVOUS_PORT))
    progress_port: int = field(default_factory=lambda: _env_int(pod.PROGRESS.name, pod.PROGRESS_PORT))
    # Each pod's Prometheus metrics (the container port named `metrics` that the chart's PodMonitor scrapes).
    metrics_port: int = field(default_factory=lambda: _env_int(pod.METRICS.name, pod.METRICS_PORT))
    # Non-root IDs the pods run as (the restricted Pod Security level requires runAsNonRoot).
    run_as_user: int = field(default_factory=lambda: _env_int("TABJOB_RUN_AS_USER", 1000))
    # How often a running job's progress is read from rank 0: status.progress (and `kubectl get tj`) should never
    # be more than 30 s behind the trainer, so keep this at or under 30.
    progress_interval: float = field(default_factory=lambda: _env_float("TABJOB_PROGRESS_INTERVAL", 15.0))
    # First retry delay; doubles per retry up to retry_max_delay (like a Job's pod failure back-off).
    retry_base_delay: float = field(default_factory=lambda: _env_float("TABJOB_RETRY_BASE_DELAY", 10.0))
    retry_max_delay: float = field(default_factory=lambda: _env_float("TABJOB_RETRY_MAX_DELAY", 360.0))
    # Bounded waits, so that no job waits forever on something that will not come (seconds).
    # A pod Terminating this long past its grace period sits on a NotReady or lost node: it counts as gone.
    lost_pod_timeout: float = field(default_factory=lambda: _env_float("TABJOB_LOST_POD_TIMEOUT", 300.0))
    # A pod whose image keeps failing to pull this long fails the job (InvalidImageName fails it at once).
    image_pull_timeout: float = field(default_factory=lambda: _env_float("TABJOB_IMAGE_PULL_TIMEOUT", 300.0))
    # An unschedulable pod is Stalled only after this long: time for a cluster autoscaler to add a node.
    unschedulable_grace: float = field(default_factory=lambda: _env_float("TABJOB_UNSCHEDULABLE_GRACE", 60.0))
    # The whole progress read from rank 0 (connect, headers, body): a slow trainer gets no more.
    progress_deadline: float = field(default_factory=lambda: _env_float("TABJOB_PROGRESS_DEADLINE", 3.0))
    # Client-side rate limit for API writes/reads the reconciler makes (client-go's QPS/burst).
    api_qps: float = field(default_factory=lambda: _env_float("TABJOB_API_QPS", 200.0))
    api_burst: int = field(default_factory=lambda: _env_int("TABJOB_API_BURST", 400))
    # This replica's name (the pod's, from the downward API, by the same name as in the trainer pods): the
    # reporting instance of its Events, and the base of its identity in leader election.
    identity: str = field(default_factory=lambda: os.environ.get(pod.POD_NAME.name) or os.uname().nodename)
    # Leader election on a coordination.k8s.io Lease, with controller-runtime's timings (seconds).
    leader_election: bool = field(default_factory=lambda: _env_flag("TABJOB_LEADER_ELECTION"))
    lease_name: str = field(default_factory=lambda: os.environ.get("TABJOB_LEASE_NAME", "tabjob-operator"))
    lease_namespace: str = field(
        default_factory=lambda: os.environ.get("TABJOB_LEASE_NAMESPACE") or os.environ.get("POD_NAMESPACE") or "default"
    )
    lease_duration: float = field(default_factory=lambda: _env_float("TABJOB_LEASE_DURATION", 15.0))
    renew_deadline: float = field(default_factory=lambda: _env_float("TABJOB_RENEW_DEADLINE", 10.0))
    retry_period: float = field(default_factory=lambda: _env_float("TABJOB_RETRY_PERIOD", 2.0))
    # Watch Kueue's Workloads, for the Admitted condition of jobs that name a queue (the chart's kueue.enabled).
    # Without it those jobs still run through Kueue; their status then shows only what their pods say.
    kueue: bool = field(default_factory=lambda: os.environ.get("TABJOB_KUEUE", "1") != "0")
    # The platform's policy (tabjob.api.platform_policy): the chart mounts its policy ConfigMap here, the same data its
    # ValidatingAdmissionPolicy holds. Empty: the chart's defaults, so an operator run by hand is no laxer than an
    # installed one.
    policy_dir: str = field(default_factory=lambda: os.environ.get("TABJOB_POLICY_DIR", ""))
    # How often that directory is read again (seconds): a policy edited in place reaches the operator this late
    # after the kubelet has refreshed the mount.
    policy_reload: float = field(default_factory=lambda: _env_float("TABJOB_POLICY_RELOAD", 10.0))
