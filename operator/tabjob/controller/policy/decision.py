"""The reconcile decision's inputs and outputs: what the reconciler observed, and what it should do.

Both are plain data, so every policy (retry, deadline, TTL, suspend) is a pure function tested with plain dicts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tabjob.api.platform_policy import Policy
from tabjob.controller.config import Settings
from tabjob.controller.policy.builders import Children
from tabjob.controller.policy.conditions import conditions_for

# A child the API server refused for what it is (invalid, too large): the same spec fails the same way, so the job
# fails. Not 404: the job's own namespace exists, so a NotFound on create is a cache that has not caught up (Kueue's
# pod webhook answered "Namespace ... not found" for a namespace created a moment before), and the next pass retries.
TERMINAL_CREATE = frozenset({400, 413, 422})


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class ChildFailure:
    """The API server refused a child (or a status) this pass: `status` is its HTTP status, 0 if none came back."""

    what: str  # kind/name
    status: int
    reason: str
    message: str


@dataclass
class Observed:
    """What the reconciler saw: the job, its desired children (None: the spec is invalid) and its pods."""

    job: dict[str, Any]
    desired: Children | None
    plan_json: dict[str, Any] | None  # the plan as status.plan shows it (results.plan_summary): fits is a count
    spec_problems: list[str]
    pods: list[dict[str, Any]]  # the job's own pods (owner uid checked), every attempt
    have_configmap: bool
    have_service: bool
    now: datetime
    progress: dict[str, Any] | None = None  # from rank 0's progress endpoint, while running
    # The installation's settings: retry delays and the bounded waits (lost pods, image pulls, unschedulable pods).
    settings: Settings = field(default_factory=Settings)
    configmap_stale: bool = False  # the plan ConfigMap was rendered from an older generation
    foreign: list[str] = field(default_factory=list)  # names of our children held by another owner's objects
    create_failure: ChildFailure | None = None  # creating a child was refused in this pass
    status_rejected: str | None = None  # the API server refused the status this pass computed (its message)
    workload: dict[str, Any] | None = None  # the Kueue Workload of this attempt's pod group, when queued (kueue.py)
    # Kueue's message on this attempt's pods that went while the operator was not looking (kueue.stop_message).
    kueue_stopped: str | None = None
    # What the platform allows jobs to ask for (platform.py): the chart's policy ConfigMap, as last read.
    policy: Policy = field(default_factory=Policy)


@dataclass
class Decision:
    status: dict[str, Any]
    create: list[dict[str, Any]] = field(default_factory=list)
    update: list[dict[str, Any]] = field(default_factory=list)  # replaced in place (the plan ConfigMap)
    delete_pods: list[str] = field(default_factory=list)  # deleted after the status is written
    force_delete: list[str] = field(default_factory=list)  # pods on a lost node: grace period 0
    delete_job: bool = False
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None  # seconds until something time-based is due (retry, deadline, TTL)
    read_progress: bool = False  # the job is running: refresh progress from rank 0

    def wake(self, seconds: float) -> None:
        """Ask for a pass in `seconds` (the earliest of all asks wins)."""
        seconds = max(0.0, seconds)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


class Pass:
    """One decision in the making: the old status, the new one, and `finish`, which sets phase and conditions."""

    def __init__(self, obs: Observed) -> None:
        self.obs = obs
        meta = obs.job["metadata"]
        self.spec: dict[str, Any] = obs.job.get("spec") or {}
        self.run_policy: dict[str, Any] = self.spec.get("runPolicy") or {}
        self.old: dict[str, Any] = dict(obs.job.get("status") or {})
        self.generation = int(meta.get("generation") or 1)
        self.now = rfc3339(obs.now)
        self.new: dict[str, Any] = {k: v for k, v in self.old.items() if k != "conditions"}
        self.new["observedGeneration"] = self.generation
        self.d = Decision(status=self.new)

    @property
    def old_phase(self) -> str | None:
        return self.old.get("phase")

    def finish(self, phase: str, reason: str, message: str, stalled: bool = False) -> Decision:
        self.new["phase"] = phase
        self.new["message"] = message
        self.new["conditions"] = conditions_for(
            phase, reason, message, stalled, self.old.get("conditions") or [], self.now, self.generation
        )
        active = {c.get("reason") for c in self.old.get("conditions") or [] if c.get("status") == "True"}
        if phase != self.old_phase or reason not in active:
            kind = "Warning" if phase == "Failed" or stalled else "Normal"
            self.d.events.append(Event(kind, reason, message or phase))
        return self.d

    def fail(self, reason: str, message: str, pods: list[str]) -> Decision:
        """A final verdict. Its survivors are deleted only after the verdict is written (execute's order), so a
        crash in between can never read our own deletion back as a retryable PodDeleted."""
        self.d.delete_pods += pods
        self.new["completionTime"] = self.now
        self.new.pop("nextRetryTime", None)
        return self.finish("Failed", reason, message)


def status_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Compare as the API server stores them (JSON), ignoring key order."""
    return json.dumps(old or {}, sort_keys=True, default=str) != json.dumps(new, sort_keys=True, default=str)
