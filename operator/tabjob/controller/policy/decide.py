"""decide: the observed job and children -> the actions and the new status. Pure: plain dicts in, plain data out.

The order is the order of precedence: a final verdict stands; a status or child the API server refused ends the
pass; then suspend, the deadline (back-off included), the retry delay, spec edits, failures, the platform's policy
(before any pod is created), and the pods' states. Each policy lives in its own module (ttl, suspend, deadline,
retry, platform); pod classification in `pods`.
"""

from __future__ import annotations

from typing import Any

from tabjob.controller.policy import admission, deadline, kueue, platform, retry, suspend, ttl
from tabjob.controller.policy import pods as podstate
from tabjob.controller.policy.decision import TERMINAL_CREATE, Decision, Event, Observed, Pass
from tabjob.controller.policy.results import progress_summary, results_from_summary, summaries


def decide(obs: Observed) -> Decision:
    p = Pass(obs)
    # A job queued through Kueue: its Admitted condition on whatever this pass decides (admission.py).
    current = [x for x in obs.pods if podstate.attempt(x) == kueue.attempt_of(p.old)]
    queue = admission.state(p, current, kueue.attempt_of(p.old)) if admission.managed(p) else None
    return admission.stamp(p, queue, current, _decide(p, queue))


def _decide(p: Pass, queue: kueue.QueueState | None) -> Decision:
    obs = p.obs
    if ttl.finished(p.old):
        return ttl.keep_verdict(p)
    live = [x for x in obs.pods if not podstate.terminating(x)]
    if obs.status_rejected is not None:
        return _status_rejected(p, live)
    if obs.desired is None or obs.plan_json is None:
        p.new.pop("plan", None)
        return p.finish("Failed", "InvalidSpec", "; ".join(obs.spec_problems) or "the spec is invalid", stalled=True)
    if suspend.suspended(p):
        return suspend.suspend(p)
    _publish_plan(p, obs.plan_json)
    if obs.create_failure is not None:
        return _create_failed(p, live)

    desired = obs.desired
    taken = [n for n in obs.foreign if n in {o["metadata"]["name"] for o in desired.all()}]
    if taken:
        p.d.wake(30.0)
        return p.finish(
            "Pending", "NameTaken", f"{', '.join(taken)} already exist(s) and belong(s) to another owner", True
        )
    if obs.configmap_stale:
        p.d.update.append(desired.configmap)  # before any pod of this generation is created (execute's order)
    if not obs.have_configmap:
        p.d.create.append(desired.configmap)
    if not obs.have_service:
        p.d.create.append(desired.service)

    restarts = int(p.old.get("restarts") or 0)
    attempt = kueue.attempt_of(p.old)  # restarts, plus the times Kueue's queue took the job back
    deleting = [x for x in obs.pods if podstate.terminating(x)]
    for pod in deleting:  # stuck Terminating on a NotReady or lost node: gone, after a bound
        due = podstate.lost(pod, obs.now, obs.settings.lost_pod_timeout)
        if due is not None and due <= 0:
            p.d.force_delete.append(podstate.name(pod))
        elif due is not None:
            p.d.wake(due)
    lingering = [x for x in deleting if podstate.name(x) not in p.d.force_delete]
    current = [x for x in live if podstate.attempt(x) == attempt]
    p.d.delete_pods = [podstate.name(x) for x in live if podstate.attempt(x) != attempt]
    if queue is not None:
        verdict = admission.on_eviction(p, queue, [x for x in obs.pods if podstate.attempt(x) == attempt])
        if verdict is not None:
            return verdict

    verdict = deadline.check(p) or retry.backing_off(p, restarts, current)
    if verdict is not None:
        return verdict
    if p.old_phase != "Running":
        verdict = _replace_outdated(p, current, lingering)
        if verdict is not None:
            return verdict

    gone: list[str] = []
    if p.old_phase == "Running":
        have_now = {podstate.name(x) for x in current}
        gone = [podstate.name(x) for x in desired.pods if podstate.name(x) not in have_now]
        gone += [podstate.name(x) for x in lingering if podstate.attempt(x) == attempt and not podstate.done(x)]
    failures = retry.failures_of(p, current, gone)
    if failures:
        return retry.awaiting_verdict(p, failures, current) or retry.on_failure(p, failures[0][1], restarts, current)

    # Create the missing pods of this attempt, once the previous group is gone (hostnames are reused).
    have = {podstate.name(x) for x in current}
    missing = [x for x in desired.pods if podstate.name(x) not in have]
    if missing:
        stale = [x for x in live if podstate.attempt(x) != attempt]
        if stale or lingering:
            n = len(stale) + len(lingering)
            return p.finish("Pending", "WaitingForPreviousPods", f"waiting for {n} pod(s) of a previous attempt to go")
        verdict = platform.refused(p)  # the platform's policy, before any pod (or child) of the job is made
        if verdict is not None:
            return verdict
        p.d.create += missing
        deadline.arm(p)  # for a queued job: at admission instead (admission.stamp)
        return p.finish("Pending", "CreatingPods", f"creating {len(missing)} of {len(desired.pods)} pod(s)")
    if queue is not None:
        verdict = admission.waiting(p, queue, current)
        if verdict is not None:
            return verdict
    return _from_pods(p, current)


def _publish_plan(p: Pass, plan: dict[str, Any]) -> None:
    if p.old.get("plan") is None or p.old.get("observedGeneration") != p.generation:
        for w in plan.get("warnings") or []:
            p.d.events.append(Event("Warning", "PlanWarning", str(w)))
    p.new["plan"] = plan
    p.new["requestedGpus"] = int(sum(x["gpus"] for x in p.new["plan"]["pods"]))
    progress = dict(p.new.get("progress") or {})
    progress.setdefault("fitsDone", 0)
    progress["fitsTotal"] = int(progress.get("fitsTotal") or p.new["plan"]["fits"])
    p.new["progress"] = progress


def _status_rejected(p: Pass, live: list[dict[str, Any]]) -> Decision:
    """The API server refused the status (too large, invalid): nothing can track this job, so it fails with the
    smallest status there is, and its pods go. Never retried: the same spec computes the same status."""
    kept: dict[str, Any] = {k: p.old[k] for k in ("startTime", "restarts", "lastFailure") if k in p.old}
    p.new.clear()
    p.new.update(kept, observedGeneration=p.generation)
    message = f"the API server refused this job's status, so the job cannot be tracked: {p.obs.status_rejected}"
    return p.fail("StatusRejected", message[:2000], [podstate.name(x) for x in live if not podstate.done(x)])


def _create_failed(p: Pass, live: list[dict[str, Any]]) -> Decision:
    failure = p.obs.create_failure
    assert failure is not None
    message = f"the API server refused to create {failure.what}: {failure.reason}: {failure.message}"[:2000]
    if failure.status in TERMINAL_CREATE:
        return p.fail("CreateRejected", message, [podstate.name(x) for x in live if not podstate.done(x)])
    if failure.status == 409:
        return p.finish("Pending", "NameTaken", f"{failure.what} already exists and belongs to another owner", True)
    if failure.status == 403:  # RBAC or a ResourceQuota: a person (or a finishing neighbour) has to free it
        return p.finish("Pending", "CreateForbidden", message, stalled=True)
    return p.finish("Pending", "CreateRetrying", message)


def _replace_outdated(p: Pass, current: list[dict[str, Any]], lingering: list[dict[str, Any]]) -> Decision | None:
    """A spec edited while the job was not running (suspended, pending, unschedulable): pods built from an older
    generation are replaced, and observedGeneration moves only once none of them is left."""
    outdated = [x for x in current + lingering if podstate.generation(x) not in (None, p.generation)]
    if not outdated:
        return None
    p.new["observedGeneration"] = p.old.get("observedGeneration") or p.generation
    p.d.delete_pods += [podstate.name(x) for x in current if x in outdated]
    message = f"replacing {len(outdated)} pod(s) built from an older spec generation"
    return p.finish("Pending", "Updating", message)


def _from_pods(p: Pass, current: list[dict[str, Any]]) -> Decision:
    """All pods of this attempt exist: their states decide the phase."""
    obs, new = p.obs, p.new
    progress = new["progress"]
    if all(podstate.succeeded(x) for x in current):
        found = summaries(current)
        if found:
            new.update(results_from_summary(found[0]))
            new["progress"] = {**progress, **(new.get("progress") or {})}
            new["progress"]["fitsTotal"] = int(new["progress"].get("fitsTotal") or progress["fitsTotal"])
        new["progress"]["summary"] = progress_summary(new["progress"])
        new["completionTime"] = p.now
        parts = [f"{len(new['models'])} model(s) on the leaderboard"] if new.get("models") else []
        if new.get("bestModel"):
            parts.append(f"best {new['bestModel']} ({new.get('evalMetric', 'score')} {new.get('score')})")
        message = "; ".join(parts) or "the trainer finished"
        if new.get("fallbacks"):
            message += f"; {new['fallbacks']} fit(s) fell back to CPU (onGpuUnavailable: FallbackToCPU)"
            p.d.events.append(
                Event("Warning", "FellBackToCPU", f"{new['fallbacks']} fit(s) asked for a GPU and ran on CPU")
            )
        return p.finish("Succeeded", "Succeeded", message)

    held = [w for x in current if (w := podstate.waiting(x, obs.now, obs.settings.unschedulable_grace)) is not None]
    for w in held:
        if w.due is not None:
            p.d.wake(w.due)
    if held:
        first = next((w for w in held if w.stalled), held[0])
        return p.finish("Pending", first.reason, first.message, stalled=first.stalled)

    if all(podstate.running(x) or podstate.succeeded(x) for x in current):
        if obs.progress:
            merged = {**progress, **{k: v for k, v in obs.progress.items() if v is not None}}
            merged["updatedTime"] = p.now
            new["progress"] = merged
        new["progress"]["summary"] = progress_summary(new["progress"])
        p.d.read_progress = True
        world = obs.plan_json["worldSize"] if obs.plan_json else "?"
        return p.finish("Running", "Running", f"{len(current)} pod(s) running, world size {world}")

    pending = sum(1 for x in current if not (podstate.running(x) or podstate.succeeded(x)))
    return p.finish("Pending", "PodsStarting", f"{pending} of {len(current)} pod(s) starting")
