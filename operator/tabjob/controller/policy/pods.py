"""Pod classification: what a pod's status says about its rank, as the kubelet, scheduler and Kueue write it.

Pure functions of one pod dict (and the time, for the bounded waits): failed and why, waiting on what, lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from tabjob.api import ANNOTATION_GENERATION, LABEL_ATTEMPT, LABEL_RANK
from tabjob.contracts.results import RETRIED_ERRORS, LauncherExit, MemoryNote, RunSummary
from tabjob.controller.policy.decision import parse_time
from tabjob.families import FAMILIES

# Waiting reasons the kubelet writes while it cannot get the image. InvalidImageName and ErrImageNeverPull never
# recover by waiting; ErrImagePull/ImagePullBackOff may (a registry hiccup) and get a bounded wait.
IMAGE_NEVER = ("InvalidImageName", "ErrImageNeverPull")
IMAGE_RETRYING = ("ErrImagePull", "ImagePullBackOff")
CONFIG_ERRORS = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
MESSAGE_TAIL = 6  # lines of a failed rank's termination message kept in the condition


@dataclass(frozen=True)
class Failure:
    reason: str
    message: str
    retryable: bool
    # The trainer's own verdict (its RunSummary's error_reason): the job's cause, whichever rank's exit came first.
    verdict: bool = False


@dataclass(frozen=True)
class Waiting:
    """A pod that is not running yet and why; `stalled` when only a person can fix it, `due` seconds until the
    bounded wait runs out (None: no bound)."""

    reason: str
    message: str
    stalled: bool
    due: float | None = None


def name(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def attempt(pod: dict[str, Any]) -> int:
    return int((pod["metadata"].get("labels") or {}).get(LABEL_ATTEMPT, "0"))


def rank(pod: dict[str, Any]) -> int:
    return int((pod["metadata"].get("labels") or {}).get(LABEL_RANK, "0"))


def generation(pod: dict[str, Any]) -> int | None:
    raw = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_GENERATION)
    return int(raw) if raw and raw.isdigit() else None


def phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def running(pod: dict[str, Any]) -> bool:
    return phase(pod) == "Running"


def succeeded(pod: dict[str, Any]) -> bool:
    return phase(pod) == "Succeeded"


def done(pod: dict[str, Any]) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def terminating(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def container_statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return list((pod.get("status") or {}).get("containerStatuses") or [])


def terminated(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cs in container_statuses(pod):
        term = (cs.get("state") or {}).get("terminated")
        if term:
            return term
    return None


def finished_at(pod: dict[str, Any]) -> str:
    term = terminated(pod) or {}
    return str(term.get("finishedAt") or "9999")


def _tail(text: str, lines: int = MESSAGE_TAIL) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def lost(pod: dict[str, Any], now: datetime, after: float) -> float | None:
    """Seconds until a Terminating pod counts as lost (<= 0: lost now); None when it is not Terminating.

    The kubelet of a NotReady or vanished node never confirms the deletion, so the pod stays Terminating forever;
    past its grace period plus `after`, nothing on that node can still be running it for us."""
    deleting = parse_time(pod["metadata"].get("deletionTimestamp"))
    if deleting is None:
        return None
    return (deleting - now).total_seconds() + after


def launcher_exit(message: str | None) -> LauncherExit | None:
    """The pod launcher's LauncherExit from a termination message; a RunSummary or a log tail is not one."""
    if not message:
        return None
    try:
        return LauncherExit.model_validate_json(message, by_name=False)  # the wire spelling only
    except ValidationError:
        return None


def trainer_verdict(message: str | None) -> RunSummary | None:
    """The trainer's RunSummary from a termination message; a log tail or a LauncherExit is not one."""
    if not message:
        return None
    try:
        return RunSummary.model_validate_json(message, by_name=False)  # the wire spelling only
    except ValidationError:
        return None


def memory_note(message: str | None) -> MemoryNote | None:
    """The trainer's MemoryNote from a termination message (a pod still running its fits when it was killed)."""
    if not message:
        return None
    try:
        return MemoryNote.model_validate_json(message, by_name=False)
    except ValidationError:
        return None


def _memory_limit(pod: dict[str, Any]) -> str | None:
    for c in (pod.get("spec") or {}).get("containers") or []:
        limit = ((c.get("resources") or {}).get("limits") or {}).get("memory")
        if limit:
            return str(limit)
    return None


def out_of_memory(pod: dict[str, Any], code: int, message: str | None) -> Failure:
    """A pod the kernel killed for memory: not retried, since another attempt meets the same limit; what to change
    comes from the trainer's estimate when the pod wrote one (MemoryNote), else the general advice."""
    limit = _memory_limit(pod)
    where = f"pod {name(pod)} (node rank {rank(pod)}) ran out of memory (OOMKilled, exit code {code}"
    where += f", limit {limit})" if limit else ")"
    note = memory_note(message)
    if note is not None:
        advice = note.advice
    else:
        sharding = ", ".join(k for k, f in FAMILIES.items() if f.shards)
        advice = (
            "raise spec.resources.memory, or train every model config data-parallel over more processes (then "
            f"{sharding} read only their shard of the table); `tabjob validate` with the data reachable names the "
            "smallest processes that fits"
        )
    # A cause, like the trainer's verdict: what a peer rank reports after this one was killed is the symptom.
    message = f"{where}; not retried, another attempt would meet the same limit: {advice}"
    return Failure("OutOfMemory", message, False, verdict=True)


def failure(pod: dict[str, Any]) -> Failure | None:
    """Why a pod failed, or None while it has not."""
    status = pod.get("status") or {}
    r, n = rank(pod), name(pod)
    term = terminated(pod)
    if term and term.get("exitCode", 0) != 0:
        code = int(term["exitCode"])
        tail = _tail(term.get("message") or "")
        if term.get("reason") == "OOMKilled":
            return out_of_memory(pod, code, term.get("message"))
        launcher = launcher_exit(term.get("message"))
        if launcher is not None:
            # torchrun gave up before any trainer process started (a rendezvous that never completed): no
            # verdict of the trainer's, so the infrastructure's failure, retried like a lost pod.
            why = f": {_tail(launcher.log_tail)}" if launcher.log_tail else ""
            message = f"pod {n} (node rank {r}): torchrun exited with code {code} before starting the trainer{why}"
            return Failure("LauncherExit", message, True)
        verdict = trainer_verdict(term.get("message"))
        if verdict is not None and verdict.error_reason and verdict.error:
            # The trainer said why in its summary (bad data, a store that refused it): that is the reason shown, and
            # only a failure to write the run's output is worth a new attempt (it resumes from the bucket).
            message = f"pod {n} (node rank {r}): {verdict.error}"
            return Failure(verdict.error_reason, message, verdict.error_reason in RETRIED_ERRORS, verdict=True)
        detail = f": {tail}" if tail and memory_note(term.get("message")) is None else ""
        return Failure("NonZeroExit", f"pod {n} (node rank {r}) exited with code {code}{detail}", code >= 128)
    if status.get("phase") == "Failed":
        # A pod-level failure with no container verdict: evicted, node lost, deadline. Not the trainer's fault.
        reason = status.get("reason") or "PodFailed"
        return Failure(reason, f"pod {n} failed: {status.get('message') or reason}", True)
    return None


def image_failure(pod: dict[str, Any], now: datetime, wait: float) -> tuple[Failure | None, float | None]:
    """(the job-ending image failure, seconds until the wait runs out): an image that will never come fails at once,
    one that keeps failing to pull fails after `wait` seconds counted from the pod's start on its node."""
    started = parse_time((pod.get("status") or {}).get("startTime")) or parse_time(
        pod["metadata"].get("creationTimestamp")
    )
    for cs in container_statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason not in IMAGE_NEVER + IMAGE_RETRYING:
            continue
        image = cs.get("image") or "?"
        detail = waiting.get("message") or reason
        if reason in IMAGE_NEVER:
            return Failure(reason, f'image "{image}" of pod {name(pod)} cannot be used: {detail}', False), None
        left = wait - (now - started).total_seconds() if started else wait
        if left <= 0:
            message = f'image "{image}" of pod {name(pod)} could not be pulled for {wait:g}s ({reason}): {detail}'
            return Failure(reason, message, False), None
        return None, left
    return None, None


def waiting(pod: dict[str, Any], now: datetime, unschedulable_grace: float) -> Waiting | None:
    """A pod held before its trainer starts: queued, unschedulable, bad config."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") != "PodScheduled" or cond.get("status") != "False":
            continue
        reason, message = cond.get("reason") or "Unschedulable", cond.get("message") or ""
        if reason == "SchedulingGated":
            # Kueue (or any scheduling gate) holds the pod until the job is admitted: queued, not stuck.
            return Waiting("Queued", f"pod {name(pod)} is waiting for admission (scheduling gates)", False)
        # Unschedulable may be an autoscaler's cue to add a node: Stalled only once that has had time.
        since = parse_time(cond.get("lastTransitionTime")) or now
        left = unschedulable_grace - (now - since).total_seconds()
        return Waiting(reason, f"pod {name(pod)}: {message or reason}", left <= 0, left if left > 0 else None)
    for cs in container_statuses(pod):
        w = (cs.get("state") or {}).get("waiting") or {}
        if w.get("reason") in CONFIG_ERRORS:
            return Waiting(w["reason"], f"pod {name(pod)}: {w.get('message') or w['reason']}", True)
        if w.get("reason") in IMAGE_RETRYING:  # within its bounded wait (image_failure ends it)
            detail = w.get("message") or w["reason"]
            return Waiting(w["reason"], f'pod {name(pod)}: image "{cs.get("image") or "?"}": {detail}', False)
    return None
