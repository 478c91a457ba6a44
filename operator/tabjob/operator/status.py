"""Pure reconcile decisions: the job, its desired children and the observed pods -> actions and the new status.

Everything the operator decides happens here, in one function (`decide`), from plain dicts, so every failure path
is unit-tested without an API server. The kopf layer only observes, executes the returned actions and patches the
returned status when it differs from the stored one.

Retry policy: the whole torchrun group is recreated (a lost rank cannot rejoin a c10d group mid-training).
Exit codes 128-255 (killed by a signal, OOM) and pod-level failures (eviction, node loss) are retried up to
runPolicy.backoffLimit with exponential delay; 1-127 are the trainer's own verdict and fail the job at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from tabjob.operator.builders import LABEL_ATTEMPT, LABEL_RANK, Children
from tabjob.results_model import RunSummary

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Suspended")
CONDITION_TYPES = ("Ready", "Reconciling", "Stalled", "Running", "Succeeded", "Failed", "Suspended")
IMAGE_ERRORS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
CONFIG_ERRORS = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
MESSAGE_TAIL = 6  # lines of a failed rank's termination message kept in the condition


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass
class Decision:
    status: dict[str, Any]
    create: list[dict[str, Any]] = field(default_factory=list)
    delete_pods: list[str] = field(default_factory=list)
    delete_job: bool = False
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None  # seconds until something time-based is due (retry, deadline, TTL)
    read_progress: bool = False  # the job is running: refresh progress from rank 0


@dataclass(frozen=True)
class Failure:
    reason: str
    message: str
    retryable: bool


def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def retry_delay(restarts: int, base: float, cap: float) -> float:
    """Delay before attempt `restarts` (1 = first retry): base, 2*base, 4*base, ... capped."""
    return float(min(cap, base * 2 ** max(0, restarts - 1)))


# ------------------------------------------------------------------------------------------- pods


def _attempt(pod: dict[str, Any]) -> int:
    return int(pod["metadata"].get("labels", {}).get(LABEL_ATTEMPT, "0"))


def _rank(pod: dict[str, Any]) -> int:
    return int(pod["metadata"].get("labels", {}).get(LABEL_RANK, "0"))


def _container_statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return list((pod.get("status") or {}).get("containerStatuses") or [])


def _terminated(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cs in _container_statuses(pod):
        term = (cs.get("state") or {}).get("terminated")
        if term:
            return term
    return None


def _tail(text: str, lines: int = MESSAGE_TAIL) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def pod_failure(pod: dict[str, Any]) -> Failure | None:
    """Why a pod failed, or None while it has not."""
    status = pod.get("status") or {}
    rank = _rank(pod)
    name = pod["metadata"]["name"]
    term = _terminated(pod)
    if term and term.get("exitCode", 0) != 0:
        code = int(term["exitCode"])
        tail = _tail(term.get("message") or "")
        if term.get("reason") == "OOMKilled":
            return Failure("OOMKilled", f"pod {name} (node rank {rank}) ran out of memory (exit code {code})", True)
        detail = f": {tail}" if tail else ""
        message = f"pod {name} (node rank {rank}) exited with code {code}{detail}"
        return Failure("NonZeroExit", message, code >= 128)
    if status.get("phase") == "Failed":
        # A pod-level failure with no container verdict: evicted, node lost, deadline. Not the trainer's fault.
        reason = status.get("reason") or "PodFailed"
        return Failure(reason, f"pod {name} failed: {status.get('message') or reason}", True)
    return None


def _waiting_problem(pod: dict[str, Any]) -> tuple[str, str] | None:
    """A pod stuck before its trainer starts: unschedulable, image pull, bad config."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason"):
            return cond["reason"], f"pod {pod['metadata']['name']}: {cond.get('message') or cond['reason']}"
    for cs in _container_statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_ERRORS + CONFIG_ERRORS:
            return waiting["reason"], f"pod {pod['metadata']['name']}: {waiting.get('message') or waiting['reason']}"
    return None


def _running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def _succeeded(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Succeeded"


def _finished_at(pod: dict[str, Any]) -> str:
    term = _terminated(pod) or {}
    return str(term.get("finishedAt") or "9999")


# ---------------------------------------------------------------------------------------- results


def parse_summary(message: str | None) -> RunSummary | None:
    """The trainer's RunSummary from a termination message; a log tail (FallbackToLogsOnError) is not one."""
    if not message:
        return None
    try:
        return RunSummary.model_validate_json(message, by_name=False)  # the wire spelling only
    except ValidationError:
        return None


def results_from_summary(summary: RunSummary) -> dict[str, Any]:
    """Status fields from the trainer's summary (one spelling: the contract in results_model.py)."""
    models = [
        m.model_dump(
            by_alias=True,
            exclude_none=True,
            include={"name", "state", "score_val", "score_test", "fit_seconds", "gpus", "device"},
        )
        for m in summary.models
    ]
    out: dict[str, Any] = {"models": models}
    if summary.best_model:
        out["bestModel"] = summary.best_model
    if summary.score is not None:
        out["score"] = summary.score
    if summary.eval_metric:
        out["evalMetric"] = summary.eval_metric
    fallbacks = max(summary.fallbacks, sum(1 for m in summary.models if m.fallback))
    if fallbacks:
        out["fallbacks"] = fallbacks
    progress = {"fitsDone": summary.fits_done, "fitsFailed": summary.fits_failed}
    if summary.fits_total:
        progress["fitsTotal"] = summary.fits_total
    out["progress"] = progress
    return out


def _summaries(pods: list[dict[str, Any]]) -> list[RunSummary]:
    """Summaries from the pods' termination messages, rank 0 first (it gathers the results)."""
    out = []
    for pod in sorted(pods, key=_rank):
        summary = parse_summary((_terminated(pod) or {}).get("message"))
        if summary is not None:
            out.append(summary)
    return out


# --------------------------------------------------------------------------------------- decision


def _condition(
    old: dict[str, dict[str, Any]], ctype: str, status: bool, reason: str, message: str, now: str, generation: int
) -> dict[str, Any]:
    value = "True" if status else "False"
    prev = old.get(ctype)
    # lastTransitionTime moves only when the status flips, as kstatus and kubectl wait expect.
    ltt = prev["lastTransitionTime"] if prev and prev.get("status") == value and prev.get("lastTransitionTime") else now
    return {
        "type": ctype,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": ltt,
        "observedGeneration": generation,
    }


def conditions_for(
    phase: str, reason: str, message: str, stalled: bool, old: list[dict[str, Any]], now: str, generation: int
) -> list[dict[str, Any]]:
    prev = {c["type"]: c for c in old if isinstance(c, dict) and "type" in c}
    in_progress = phase in ("Pending", "Running")

    def cond(ctype: str, value: bool, why: str, msg: str = "") -> dict[str, Any]:
        return _condition(prev, ctype, value, why, msg, now, generation)

    def only(match: str, msg: str = "") -> tuple[bool, str, str]:
        return (phase == match, reason if phase == match else phase, msg if phase == match else "")

    return [
        cond("Ready", phase == "Succeeded", reason, message),
        cond("Reconciling", in_progress, reason if in_progress else phase, message if in_progress else ""),
        cond(
            "Stalled",
            stalled or phase == "Failed",
            reason if stalled or phase == "Failed" else phase,
            message if stalled or phase == "Failed" else "",
        ),
        cond("Running", *only("Running", message)),
        cond("Succeeded", *only("Succeeded", message)),
        cond("Failed", *only("Failed", message)),
        cond("Suspended", *only("Suspended", message)),
    ]


def plan_summary(plan_json: dict[str, Any]) -> dict[str, Any]:
    """The plan as published in status: pods and totals; the full plan with every fit stays in the ConfigMap."""
    return {
        "pods": [
            {k: p[k] for k in ("name", "cpus", "gpus", "memory", "procs") if p.get(k) is not None}
            for p in plan_json["pods"]
        ],
        "worldSize": plan_json["worldSize"],
        "concurrency": plan_json["concurrency"],
        "peak": plan_json["peak"],
        "requested": plan_json["requested"],
        "fits": len(plan_json["fits"]),
        "warnings": plan_json.get("warnings", []),
    }


@dataclass
class Observed:
    """What the reconciler saw: the job, its desired children (None: the spec is invalid) and its pods."""

    job: dict[str, Any]
    desired: Children | None
    plan_json: dict[str, Any] | None
    spec_problems: list[str]
    pods: list[dict[str, Any]]
    have_configmap: bool
    have_service: bool
    now: datetime
    progress: dict[str, Any] | None = None  # from rank 0's progress endpoint, while running
    retry_base_delay: float = 10.0
    retry_max_delay: float = 360.0


def decide(obs: Observed) -> Decision:
    meta, spec = obs.job["metadata"], obs.job.get("spec") or {}
    old: dict[str, Any] = dict(obs.job.get("status") or {})
    generation = int(meta.get("generation") or 1)
    now = rfc3339(obs.now)
    run_policy = spec.get("runPolicy") or {}
    new: dict[str, Any] = {k: v for k, v in old.items() if k != "conditions"}
    new["observedGeneration"] = generation
    d = Decision(status=new)
    old_phase = old.get("phase")

    def finish(phase: str, reason: str, message: str, stalled: bool = False) -> Decision:
        new["phase"] = phase
        new["message"] = message
        new["conditions"] = conditions_for(
            phase, reason, message, stalled, old.get("conditions") or [], now, generation
        )
        active = {c.get("reason") for c in old.get("conditions") or [] if c.get("status") == "True"}
        if phase != old_phase or reason not in active:
            kind = "Warning" if phase == "Failed" or stalled else "Normal"
            d.events.append(Event(kind, reason, message or phase))
        return d

    # 1. An invalid spec: nothing to run until someone edits it (a new generation is decided afresh).
    if obs.desired is None or obs.plan_json is None:
        message = "; ".join(obs.spec_problems) or "the spec is invalid"
        new.pop("plan", None)
        return finish("Failed", "InvalidSpec", message, stalled=True)

    plan = obs.plan_json
    if old.get("plan") is None or old.get("observedGeneration") != generation:
        for w in plan.get("warnings", []):
            d.events.append(Event("Warning", "PlanWarning", w))
    new["plan"] = plan_summary(plan)
    new["requestedGpus"] = int(sum(p["gpus"] for p in plan["pods"]))
    progress = dict(new.get("progress") or {})
    progress.setdefault("fitsDone", 0)
    progress["fitsTotal"] = int(progress.get("fitsTotal") or len(plan["fits"]))
    new["progress"] = progress

    restarts = int(old.get("restarts") or 0)
    live = [p for p in obs.pods if not p["metadata"].get("deletionTimestamp")]
    terminating = [p for p in obs.pods if p["metadata"].get("deletionTimestamp")]
    current = [p for p in live if _attempt(p) == restarts]
    stale = [p for p in live if _attempt(p) != restarts]

    # 2. Finished: keep the verdict (and the pods, for logs); count down ttlSecondsAfterFinished.
    # Like a Job, a finished run is final: later spec edits (say, a TTL) do not start it again.
    if old_phase in ("Succeeded", "Failed") and old.get("completionTime"):
        new["conditions"] = conditions_for(
            old_phase,
            _reason_of(old, old_phase),
            old.get("message", ""),
            old_phase == "Failed",
            old.get("conditions") or [],
            now,
            generation,
        )
        d.delete_pods = [p["metadata"]["name"] for p in live if not _done(p)]
        ttl = run_policy.get("ttlSecondsAfterFinished")
        if ttl is not None:
            done_at = parse_time(old["completionTime"]) or obs.now
            left = (done_at + timedelta(seconds=int(ttl)) - obs.now).total_seconds()
            if left <= 0:
                d.delete_job = True
            else:
                d.requeue_after = left
        return d

    # 3. Suspended: delete the pods, keep results and restarts; the deadline clock stops (startTime cleared).
    if run_policy.get("suspend"):
        d.delete_pods = [p["metadata"]["name"] for p in live]
        new.pop("startTime", None)
        new.pop("nextRetryTime", None)
        return finish("Suspended", "Suspended", "suspended: pods deleted, results kept")

    # Children that do not depend on the attempt.
    if not obs.have_configmap:
        d.create.append(obs.desired.configmap)
    if not obs.have_service:
        d.create.append(obs.desired.service)

    # 4. Waiting out a retry delay; old pods go first so a new group never meets a stale peer.
    d.delete_pods = [p["metadata"]["name"] for p in stale]
    retry_at = parse_time(old.get("nextRetryTime"))
    if retry_at and retry_at > obs.now:
        d.requeue_after = (retry_at - obs.now).total_seconds()
        d.delete_pods += [p["metadata"]["name"] for p in current]
        return finish(
            "Pending",
            "BackoffDelay",
            f"retry {restarts} of {run_policy.get('backoffLimit', 3)} at {old['nextRetryTime']} after: "
            f"{old.get('lastFailure', '')}",
        )
    new.pop("nextRetryTime", None)

    # 5. The deadline counts from the first pod creation of this run.
    deadline = run_policy.get("activeDeadlineSeconds")
    start = parse_time(new.get("startTime"))
    if deadline and start:
        left = (start + timedelta(seconds=int(deadline)) - obs.now).total_seconds()
        if left <= 0:
            d.delete_pods += [p["metadata"]["name"] for p in current if not _done(p)]
            new["completionTime"] = now
            return finish("Failed", "DeadlineExceeded", f"the job ran longer than activeDeadlineSeconds={deadline}")
        d.requeue_after = left

    # 6. Failures of the current group: retry the whole group, or stop. A pod of a running group that was
    # deleted (by a person, a drain, preemption) is a retryable failure: its peers cannot finish without it.
    failures = [(p, f) for p in current if (f := pod_failure(p)) is not None]
    if old_phase == "Running":
        have_now = {p["metadata"]["name"] for p in current}
        gone = [p["metadata"]["name"] for p in obs.desired.pods if p["metadata"]["name"] not in have_now]
        gone += [p["metadata"]["name"] for p in terminating if _attempt(p) == restarts and not _done(p)]
        if gone:
            failures.insert(
                0,
                (
                    {"metadata": {"name": gone[0]}},
                    Failure("PodDeleted", f"pod {gone[0]} was deleted while the group ran", True),
                ),
            )
    # The earliest failure is the cause; within the same second a signal or eviction beats a peer's exit 1, which
    # is what torchrun reports when another rank of the group died.
    failures.sort(
        key=lambda pf: (_finished_at(pf[0]) if pf[1].reason != "PodDeleted" else "", not pf[1].retryable, _rank(pf[0]))
    )
    if failures:
        first = failures[0][1]  # the earliest failure is the cause; its peers fail because it left the group
        new["lastFailure"] = first.message
        survivors = [p["metadata"]["name"] for p in current if not _done(p)]
        limit = int(run_policy.get("backoffLimit", 3))
        if not first.retryable:
            d.delete_pods += survivors
            new["completionTime"] = now
            return finish("Failed", first.reason, first.message)
        if restarts >= limit:
            d.delete_pods += survivors
            new["completionTime"] = now
            return finish(
                "Failed",
                "BackoffLimitExceeded",
                f"failed {restarts + 1} time(s), backoffLimit={limit}; last: {first.message}",
            )
        delay = retry_delay(restarts + 1, obs.retry_base_delay, obs.retry_max_delay)
        new["restarts"] = restarts + 1
        new["nextRetryTime"] = rfc3339(obs.now + timedelta(seconds=delay))
        d.delete_pods += [p["metadata"]["name"] for p in current]
        d.requeue_after = delay
        d.events.append(
            Event(
                "Warning",
                "Retrying",
                f"recreating the torchrun group (retry {restarts + 1} of {limit}) in {delay:g}s after: {first.message}",
            )
        )
        return finish("Pending", "Retrying", f"retry {restarts + 1} of {limit} in {delay:g}s after: {first.message}")

    # 7. Create the missing pods of this attempt, once the previous group is gone (hostnames are reused).
    have = {p["metadata"]["name"] for p in current}
    missing = [p for p in obs.desired.pods if p["metadata"]["name"] not in have]
    if missing:
        if stale or terminating:
            return finish(
                "Pending",
                "WaitingForPreviousPods",
                f"waiting for {len(stale) + len(terminating)} pod(s) of a previous attempt to go",
            )
        d.create += missing
        new.setdefault("startTime", now)
        if deadline and not start:
            d.requeue_after = float(deadline)
        return finish("Pending", "CreatingPods", f"creating {len(missing)} of {len(obs.desired.pods)} pod(s)")

    # 8. All pods exist: read their state.
    if all(_succeeded(p) for p in current):
        summaries = _summaries(current)
        if summaries:
            new.update(results_from_summary(summaries[0]))
            new["progress"] = {**progress, **(new.get("progress") or {})}
            new["progress"]["fitsTotal"] = int(new["progress"].get("fitsTotal") or progress["fitsTotal"])
        new["progress"]["summary"] = _summary(new["progress"])
        new["completionTime"] = now
        parts = [f"{len(new['models'])} model(s) on the leaderboard"] if new.get("models") else []
        if new.get("bestModel"):
            parts.append(f"best {new['bestModel']} ({new.get('evalMetric', 'score')} {new.get('score')})")
        message = "; ".join(parts) or "the trainer finished"
        if new.get("fallbacks"):
            message += f"; {new['fallbacks']} fit(s) fell back to CPU (onGpuUnavailable: FallbackToCPU)"
            d.events.append(
                Event("Warning", "FellBackToCPU", f"{new['fallbacks']} fit(s) asked for a GPU and ran on CPU")
            )
        return finish("Succeeded", "Succeeded", message)

    waiting = [w for p in current if (w := _waiting_problem(p)) is not None]
    if waiting:
        reason, message = waiting[0]
        return finish("Pending", reason, message, stalled=True)

    if all(_running(p) or _succeeded(p) for p in current):
        if obs.progress:
            merged = {**progress, **{k: v for k, v in obs.progress.items() if v is not None}}
            merged["updatedTime"] = now
            new["progress"] = merged
        new["progress"]["summary"] = _summary(new["progress"])
        d.read_progress = True
        return finish("Running", "Running", f"{len(current)} pod(s) running, world size {plan['worldSize']}")

    pending = sum(1 for p in current if not (_running(p) or _succeeded(p)))
    return finish("Pending", "PodsStarting", f"{pending} of {len(current)} pod(s) starting")


def _done(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _summary(progress: dict[str, Any]) -> str:
    text = f"{progress.get('fitsDone', 0)}/{progress.get('fitsTotal', 0)}"
    if progress.get("fitsFailed"):
        text += f" ({progress['fitsFailed']} failed)"
    return text


def _reason_of(status: dict[str, Any], ctype: str) -> str:
    for c in status.get("conditions") or []:
        if c.get("type") == ctype:
            return str(c.get("reason") or ctype)
    return ctype


def status_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Compare as the API server stores them (JSON), ignoring key order."""
    return json.dumps(old or {}, sort_keys=True, default=str) != json.dumps(new, sort_keys=True, default=str)
