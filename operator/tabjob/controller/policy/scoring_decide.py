"""decide for a TabularPrediction: what the operator saw -> the pods to create and delete, and the new status. Pure.

Its pods are independent (no rendezvous): each scores its own shards and commits them, so one that fails, is
deleted or is evicted is replaced alone, and the replacement skips what was committed. Order of precedence: a
verdict stands (and counts down its TTL); an invalid spec; a refused pod; the model reference; the deadline; each
index's pod (create, replace, or read its verdict: a preflight refusal fails the whole prediction); then the phase
from the pods. The status is computed here and nowhere else, from the pods' reports (`ScoringProgress` while they
run, `ScoringSummary` when they end): the operator never reads the bucket.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from tabjob.contracts.scoring import RETRIED_REASONS, ScoringProgress, ScoringSummary
from tabjob.controller.config import Settings
from tabjob.controller.policy import pods as podstate
from tabjob.controller.policy.conditions import conditions_for
from tabjob.controller.policy.decision import TERMINAL_CREATE, ChildFailure, Decision, Event, parse_time, rfc3339
from tabjob.controller.policy.scoring_builders import scoring_pod_name

FAILED_SHOWN = 8  # shard errors kept in status.failedShards


@dataclass
class PredictionObserved:
    tp: dict[str, Any]  # the TabularPrediction as cached
    pods: list[dict[str, Any]]  # its own pods (owner uid checked)
    now: datetime
    settings: Settings = field(default_factory=Settings)
    desired: Any = None  # callable (index, created, model_uri) -> pod dict; None when the spec is invalid
    spec_problems: list[str] = field(default_factory=list)
    model_job: dict[str, Any] | None = None  # the TabularJob spec.model.job names, as cached (None: absent)
    progress: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> ScoringProgress, read this pass
    pods_listed: bool = False  # `pods` comes from a list of the API server's, not the watch cache
    create_failure: ChildFailure | None = None


@dataclass
class PredictionDecision(Decision):
    list_pods: bool = False  # a pod we created is not in the cache: list the API server's before deciding


def model_uri(spec: dict[str, Any], job: dict[str, Any] | None) -> tuple[str | None, str, str]:
    """(the run's URI, reason, message): the URI, or why the model reference cannot be scored with (yet)."""
    ref = spec.get("model") or {}
    if ref.get("uri"):
        return str(ref["uri"]), "", ""
    name = ref.get("job")
    if job is None:
        return None, "ModelNotFound", f"spec.model.job: no TabularJob {name!r} in this namespace"
    uri = (job.get("spec") or {}).get("output", {}).get("uri")
    if not uri:
        return (
            None,
            "ModelNotInObjectStorage",
            (
                f"spec.model.job: TabularJob {name} keeps its run in its pods' volume; score a job with "
                "spec.output.uri (its run in object storage), or name a run's URI in spec.model.uri"
            ),
        )
    status = job.get("status") or {}
    phase = status.get("phase") or "Pending"
    if phase != "Succeeded":
        return (
            None,
            "ModelNotReady",
            (
                f"spec.model.job: TabularJob {name} is {phase}, not a finished run; apply this prediction once it "
                f"Succeeded (tabjob wait {name})"
            ),
        )
    return str(status.get("outputUri") or uri), "", ""


def summary_of(pod: dict[str, Any]) -> ScoringSummary | None:
    term = podstate.terminated(pod) or {}
    try:
        return ScoringSummary.model_validate_json(term.get("message") or "", by_name=False)
    except ValidationError:
        return None


class _Pass:
    def __init__(self, obs: PredictionObserved) -> None:
        self.obs = obs
        self.spec: dict[str, Any] = obs.tp.get("spec") or {}
        self.old: dict[str, Any] = dict(obs.tp.get("status") or {})
        self.generation = int(obs.tp["metadata"].get("generation") or 1)
        self.now = rfc3339(obs.now)
        self.new: dict[str, Any] = {k: v for k, v in self.old.items() if k != "conditions"}
        self.new["observedGeneration"] = self.generation
        self.d = PredictionDecision(status=self.new)

    def finish(self, phase: str, reason: str, message: str, stalled: bool = False) -> PredictionDecision:
        self.new["phase"], self.new["message"] = phase, message
        old = self.old.get("conditions") or []
        self.new["conditions"] = conditions_for(phase, reason, message, stalled, old, self.now, self.generation)
        active = {c.get("reason") for c in old if c.get("status") == "True"}
        if phase != self.old.get("phase") or reason not in active:
            self.d.events.append(Event("Warning" if phase == "Failed" or stalled else "Normal", reason, message))
        return self.d

    def fail(self, reason: str, message: str) -> PredictionDecision:
        self.d.delete_pods += [podstate.name(x) for x in self.obs.pods if not podstate.done(x)]
        self.new["completionTime"] = self.now
        return self.finish("Failed", reason, message[:2000])


def decide_prediction(obs: PredictionObserved) -> PredictionDecision:
    p = _Pass(obs)
    if p.old.get("phase") in ("Succeeded", "Failed"):
        return _keep_verdict(p)
    if obs.desired is None:
        return p.finish("Failed", "InvalidSpec", "; ".join(obs.spec_problems) or "the spec is invalid", stalled=True)
    if obs.create_failure is not None:
        f = obs.create_failure
        message = f"the API server refused to create {f.what}: {f.reason}: {f.message}"
        if f.status in TERMINAL_CREATE:
            return p.fail("CreateRejected", message)
        return p.finish("Pending", "CreateForbidden" if f.status == 403 else "CreateRetrying", message, f.status == 403)
    uri, reason, message = model_uri(p.spec, obs.model_job)
    if uri is None:
        return p.fail(reason, message)
    p.new["modelUri"], p.new["outputUri"] = uri, (p.spec.get("output") or {}).get("uri")
    verdict = _deadline(p)
    if verdict is not None:
        return verdict
    verdict = _pods(p, uri)
    if verdict is not None:
        return verdict
    return _phase(p)


def _keep_verdict(p: _Pass) -> PredictionDecision:
    p.new["conditions"] = p.old.get("conditions") or []
    p.d.delete_pods += [podstate.name(x) for x in p.obs.pods if not podstate.done(x) and not podstate.terminating(x)]
    ttl = (p.spec.get("runPolicy") or {}).get("ttlSecondsAfterFinished")
    done = parse_time(p.old.get("completionTime"))
    if ttl is not None and done is not None:
        left = (done + timedelta(seconds=int(ttl)) - p.obs.now).total_seconds()
        if left <= 0:
            p.d.delete_job = True
        else:
            p.d.wake(left)
    return p.d


def _deadline(p: _Pass) -> PredictionDecision | None:
    limit = (p.spec.get("runPolicy") or {}).get("activeDeadlineSeconds")
    started = parse_time(p.old.get("startTime"))
    if limit is None or started is None:
        return None
    left = (started + timedelta(seconds=int(limit)) - p.obs.now).total_seconds()
    if left <= 0:
        return p.fail("DeadlineExceeded", f"still scoring after spec.runPolicy.activeDeadlineSeconds ({limit} s)")
    p.d.wake(left)
    return None


def _pods(p: _Pass, uri: str) -> PredictionDecision | None:
    """Each index's pod: created, replaced, or its verdict read. A verdict that ends the prediction is returned."""
    obs, n = p.obs, int(p.spec.get("parallelism") or 1)
    created = (list(p.old.get("created") or []) + [0] * n)[:n]
    by_name = {podstate.name(x): x for x in obs.pods}
    name = obs.tp["metadata"]["name"]
    current = {scoring_pod_name(name, i, created[i]) for i in range(n) if created[i]}
    p.d.delete_pods += [k for k, x in by_name.items() if k not in current and not podstate.terminating(x)]
    limit = int((p.spec.get("runPolicy") or {}).get("backoffLimit", 3))
    for i in range(n):
        pod = by_name.get(scoring_pod_name(name, i, created[i])) if created[i] else None
        if created[i] and pod is None:
            if not obs.pods_listed:  # the watch may not have delivered it yet: look at the API server first
                p.d.list_pods = True
                return p.d
            _replace(p, created, i, f"pod {scoring_pod_name(name, i, created[i])} disappeared (deleted or evicted)")
        elif pod is not None and not podstate.terminating(pod) and podstate.phase(pod) == "Failed":
            summary = summary_of(pod)
            if summary is not None and summary.error_reason and summary.error_reason not in RETRIED_REASONS:
                return p.fail(summary.error_reason, f"pod {podstate.name(pod)}: {summary.error}")
            why = podstate.failure(pod)
            message = f"pod {podstate.name(pod)}: {summary.error}" if summary and summary.error else None
            p.new["failures"] = int(p.old.get("failures") or 0) + 1
            if p.new["failures"] > limit:
                last = message or (why.message if why else "?")
                return p.fail(
                    "BackoffLimitExceeded",
                    f"{p.new['failures']} pod failures, over spec.runPolicy.backoffLimit ({limit}); the last: {last}",
                )
            p.d.delete_pods.append(podstate.name(pod))
            _replace(p, created, i, message or (why.message if why else "failed"))
        elif pod is not None:
            image, due = podstate.image_failure(pod, obs.now, obs.settings.image_pull_timeout)
            if image is not None:
                return p.fail(image.reason, image.message)
            if due is not None:
                p.d.wake(due)
        if created[i] == 0:
            created[i] = 1
            p.d.create.append(obs.desired(i, 1, uri))
    p.new["created"] = created
    if p.d.create and not p.old.get("startTime"):
        p.new["startTime"] = p.now
    return None


def _replace(p: _Pass, created: list[int], i: int, why: str) -> None:
    created[i] += 1
    p.new["restarts"] = int(p.old.get("restarts") or 0) + 1
    p.new["lastFailure"] = why[:1000]
    p.d.events.append(Event("Warning", "PodReplaced", why[:1000]))
    p.d.create.append(p.obs.desired(i, created[i], p.new["modelUri"]))


def _phase(p: _Pass) -> PredictionDecision:
    obs, new = p.obs, p.new
    n = int(p.spec.get("parallelism") or 1)
    name = obs.tp["metadata"]["name"]
    by_name = {podstate.name(x): x for x in obs.pods}
    olds = {int(e.get("index", -1)): e for e in p.old.get("pods") or []}
    entries, current, summaries = [], [], []
    for i in range(n):
        pod_name = scoring_pod_name(name, i, new["created"][i])
        pod = by_name.get(pod_name)
        entry = dict(olds.get(i) or {"index": i})
        if entry.get("pod") != pod_name:  # a replacement starts its own counters (committed rows are re-found)
            entry = {"index": i, **{k: v for k, v in entry.items() if k in ("shardsTotal",)}}
        entry["pod"], entry["state"] = pod_name, podstate.phase(pod) if pod is not None else "Pending"
        report: ScoringProgress | None = summary_of(pod) if pod is not None and podstate.done(pod) else None
        if report is None and i in obs.progress:
            report = ScoringProgress.model_validate(obs.progress[i])
        if report is not None:
            entry.update(report.model_dump(by_alias=True, include={"shards_done", "shards_total", "rows_done",
                                                                   "rows_scored", "seconds_scoring"}))  # fmt: skip
            new["shardsTotal"] = max(int(new.get("shardsTotal") or 0), report.plan_shards)
            if report.plan_rows is not None:
                new["rowsTotal"] = report.plan_rows
        if isinstance(report, ScoringSummary):
            summaries.append(report)
        entries.append(entry)
        if pod is not None:
            current.append(pod)
    new["pods"] = entries
    _totals(p, entries, summaries)
    if p.d.create:
        return p.finish("Pending", "CreatingPods", f"creating {len(p.d.create)} of {n} scoring pod(s)")
    if len(current) == n and all(podstate.succeeded(x) for x in current):
        return _verdict(p, summaries)
    held = [w for x in current if (w := podstate.waiting(x, obs.now, obs.settings.unschedulable_grace)) is not None]
    for w in held:
        if w.due is not None:
            p.d.wake(w.due)
    if held and not any(podstate.running(x) for x in current):
        first = next((w for w in held if w.stalled), held[0])
        return p.finish("Pending", first.reason, first.message, stalled=first.stalled)
    if any(podstate.running(x) for x in current):
        p.d.read_progress = True
        return p.finish("Running", "Scoring", _running_message(new, current))
    return p.finish("Pending", "PodsStarting", f"{n - len(current) + sum(not podstate.running(x) for x in current)}"
                    f" of {n} scoring pod(s) starting")  # fmt: skip


def _totals(p: _Pass, entries: list[dict[str, Any]], summaries: list[ScoringSummary]) -> None:
    new = p.new
    new["shardsDone"] = sum(int(e.get("shardsDone") or 0) for e in entries)
    new["rowsScored"] = sum(int(e.get("rowsDone") or 0) for e in entries)
    failures = [f for s in summaries for f in s.failures]
    new["shardsFailed"] = sum(s.shards_failed for s in summaries)
    new["failedShards"] = [{"shard": f.shard, "error": f.error} for f in sorted(failures, key=lambda f: f.shard)][
        :FAILED_SHOWN
    ]
    seconds = max((float(e.get("secondsScoring") or 0) for e in entries), default=0.0)
    scored = sum(int(e.get("rowsScored") or 0) for e in entries)
    new["rowsPerSecond"] = round(scored / seconds, 1) if seconds > 0 and scored else None
    total = new.get("rowsTotal")
    left = (total - new["rowsScored"]) if total is not None else None
    rate = new["rowsPerSecond"]
    new["etaSeconds"] = int(left / rate) if rate and left is not None and left > 0 else (0 if left == 0 else None)
    pct = f" ({100 * new['rowsScored'] // total}%)" if total else ""
    new["progress"] = f"{new['rowsScored']}/{total if total is not None else '?'}{pct}"
    for key in ("rowsPerSecond", "etaSeconds", "rowsTotal"):
        if new.get(key) is None:
            new.pop(key, None)


def _running_message(new: dict[str, Any], current: list[dict[str, Any]]) -> str:
    running = sum(podstate.running(x) for x in current)
    parts = [f"{running} pod(s) scoring", f"rows {new['progress']}"]
    if new.get("rowsPerSecond"):
        parts.append(f"{new['rowsPerSecond']:g} rows/s")
    if new.get("etaSeconds") is not None:
        parts.append(f"ETA {new['etaSeconds']} s")
    return ", ".join(parts)


def _verdict(p: _Pass, summaries: list[ScoringSummary]) -> PredictionDecision:
    new = p.new
    new["completionTime"] = p.now
    new.pop("etaSeconds", None)
    if new["shardsFailed"]:
        first = "; ".join(f["error"] for f in new["failedShards"][:3])
        return p.finish("Failed", "ShardsFailed", f"{new['shardsFailed']} of {new.get('shardsTotal', '?')} shard(s) "
                        f"failed, the others are committed (no _SUCCESS): {first}")  # fmt: skip
    if not any(s.success_marker for s in summaries):
        return p.finish("Failed", "Incomplete", "every pod finished but none found every shard committed")
    out = (p.spec.get("output") or {}).get("uri", "")
    message = f"{new['rowsScored']} rows scored into {new.get('shardsTotal', '?')} part file(s) under {out}; _SUCCESS"
    return p.finish("Succeeded", "Succeeded", message)
