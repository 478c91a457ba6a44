"""Retry policy: the whole torchrun group is recreated (a lost rank cannot rejoin a c10d group mid-training).

Exit codes 128-255 (killed by a signal, OOM), a torchrun that gave up before starting the trainer (LauncherExit,
its rendezvous never completed) and pod-level failures (eviction, node loss, deletion) are retried up to
runPolicy.backoffLimit with exponential delay; other exit codes 1-127 are the trainer's own verdict, and an image
that cannot be pulled will not be pulled by the next group either: those fail the job at once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tabjob.controller.policy import pods as podstate
from tabjob.controller.policy.decision import Decision, Event, Pass, parse_time, rfc3339
from tabjob.controller.policy.pods import Failure


def retry_delay(restarts: int, base: float, cap: float) -> float:
    """Delay before attempt `restarts` (1 = first retry): base, 2*base, 4*base, ... capped."""
    return float(min(cap, base * 2 ** max(0, restarts - 1)))


def backing_off(p: Pass, restarts: int, current: list[dict[str, Any]]) -> Decision | None:
    """Waiting out a retry delay: the old group's pods go first so a new group never meets a stale peer."""
    retry_at = parse_time(p.old.get("nextRetryTime"))
    if not retry_at or retry_at <= p.obs.now:
        p.new.pop("nextRetryTime", None)
        return None
    p.d.wake((retry_at - p.obs.now).total_seconds())
    p.d.delete_pods += [podstate.name(x) for x in current]
    limit = p.run_policy.get("backoffLimit", 3)
    message = f"retry {restarts} of {limit} at {p.old['nextRetryTime']} after: {p.old.get('lastFailure', '')}"
    return p.finish("Pending", "BackoffDelay", message)


def failures_of(p: Pass, current: list[dict[str, Any]], gone: list[str]) -> list[tuple[dict[str, Any], Failure]]:
    """The current group's failures, the cause first. A pod of a running group that was deleted (by a person, a
    drain, preemption, a lost node) is a retryable failure: its peers cannot finish without it."""
    found: list[tuple[dict[str, Any], Failure]] = []
    for pod in current:
        f = podstate.failure(pod)
        if f is None:
            f, due = podstate.image_failure(pod, p.obs.now, p.obs.settings.image_pull_timeout)
            if due is not None:
                p.d.wake(due)
        if f is not None:
            found.append((pod, f))
    if gone:
        found.insert(
            0,
            (
                {"metadata": {"name": gone[0]}},
                Failure("PodDeleted", f"pod {gone[0]} was deleted while the group ran", True),
            ),
        )
    # The trainer's own verdict (bad data, a store that refused it) is the cause wherever it is: a peer rank that
    # stopped first only reports torchrun's exit 1. Otherwise the earliest failure is the cause; within the same
    # second a signal or eviction beats a peer's exit 1, which is what torchrun reports when another rank died.
    found.sort(
        key=lambda pf: (
            not pf[1].verdict,
            podstate.finished_at(pf[0]) if pf[1].reason != "PodDeleted" else "",
            not pf[1].retryable,
            podstate.rank(pf[0]),
        )
    )
    return found


# How long a peer's bare exit waits for rank 0, still running, to write the trainer's verdict (its summary).
VERDICT_GRACE = 30.0


def awaiting_verdict(p: Pass, failures: list[tuple[dict[str, Any], Failure]], current: list[dict[str, Any]]) -> (
    Decision | None
):  # fmt: skip
    """A peer rank's exit 1 is usually the symptom: when every rank meets the same bad input, torchrun in another
    pod may stop a moment before rank 0 has written why. While rank 0 still runs, and for at most VERDICT_GRACE
    seconds after that exit, wait for rank 0's verdict instead of failing the job with the symptom."""
    pod, first = failures[0]
    if first.verdict or first.retryable or first.reason != "NonZeroExit" or podstate.rank(pod) == 0:
        return None
    zero = next((x for x in current if podstate.rank(x) == 0), None)
    ended = parse_time(podstate.finished_at(pod))
    if zero is None or podstate.done(zero) or ended is None:
        return None
    left = (ended + timedelta(seconds=VERDICT_GRACE) - p.obs.now).total_seconds()
    if left <= 0:
        return None
    p.d.wake(left)
    return p.finish("Running", "AwaitingVerdict", f"{first.message}; waiting up to {left:.0f}s for rank 0's verdict")


def on_failure(p: Pass, first: Failure, restarts: int, current: list[dict[str, Any]]) -> Decision:
    p.new["lastFailure"] = first.message
    survivors = [podstate.name(x) for x in current if not podstate.done(x)]
    limit = int(p.run_policy.get("backoffLimit", 3))
    if not first.retryable:
        return p.fail(first.reason, first.message, survivors)
    if restarts >= limit:
        message = f"failed {restarts + 1} time(s), backoffLimit={limit}; last: {first.message}"
        return p.fail("BackoffLimitExceeded", message, survivors)
    delay = retry_delay(restarts + 1, p.obs.settings.retry_base_delay, p.obs.settings.retry_max_delay)
    p.new["restarts"] = restarts + 1
    p.new["nextRetryTime"] = rfc3339(p.obs.now + timedelta(seconds=delay))
    p.d.delete_pods += [podstate.name(x) for x in current]
    p.d.wake(delay)
    why = f"(retry {restarts + 1} of {limit}) in {delay:g}s after: {first.message}"
    p.d.events.append(Event("Warning", "Retrying", f"recreating the torchrun group {why}"))
    return p.finish("Pending", "Retrying", f"retry {restarts + 1} of {limit} in {delay:g}s after: {first.message}")
