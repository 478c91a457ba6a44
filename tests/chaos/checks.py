"""What every chaos run checks once its faults are over, and where its figures go.

A job's verdict is its phase plus the reason of the condition of that name (Succeeded/Succeeded,
Failed/InvalidSpec, ...). Its pods must be exactly its plan's (none twice, none owned by another uid, none of an
older attempt) and none may be left Terminating: a fault may cost a retry, never a stuck or doubled child.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.cluster.fixtures import Cluster
from tests.e2e.jobs import get, job, pods, status

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "bench" / "results" / "chaos.log"
TERMINAL = ("Succeeded", "Failed", "Suspended")


def trainer_fails(name: str, **spec: Any) -> dict[str, Any]:
    """A job every check before the trainer accepts and the trainer itself fails (exit 1-127, not retried): its
    table is not there. (A label that is not a column no longer gets that far: the planner refuses it.)"""
    data = {"train": "/data/no-such-table.csv", "label": "target", "evalMetric": "roc_auc"}
    return job(name, data=data, **spec)


def verdict(st: dict[str, Any]) -> tuple[str | None, str | None]:
    phase = st.get("phase")
    reason = next((c.get("reason") for c in st.get("conditions") or [] if c["type"] == phase), None)
    return phase, reason


def finished(st: dict[str, Any]) -> bool:
    # A suspended job is finished for a chaos run once the operator has observed it (it never gets pods).
    return st.get("phase") in TERMINAL and st.get("observedGeneration") is not None


def wait_finished(cluster: Cluster, ns: str, names: list[str], timeout: float) -> dict[str, dict[str, Any]]:
    """Every job's status once all are finished; fails naming the ones that were not by `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {name: status(cluster, ns, name) for name in names}
        if all(finished(st) for st in seen.values()):
            return seen
        if time.monotonic() > deadline:
            late = {n: verdict(st) for n, st in seen.items() if not finished(st)}
            raise AssertionError(f"not finished after {timeout:.0f} s: {late}")
        time.sleep(2)


def ended(pod: dict[str, Any]) -> bool:
    """A pod whose containers have all exited and that nobody is deleting: a finished job keeps these, as a Job
    keeps its finished pods for their logs. Anything else left after a verdict is stuck."""
    exited = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
    return exited and not pod["metadata"].get("deletionTimestamp")


def pod_problems(cluster: Cluster, ns: str, name: str, st: dict[str, Any], settle: float = 60.0) -> list[str]:
    """Duplicate, orphan, stale or stuck pods of one finished job. A finished job deletes the pods still running at
    its verdict (a Succeeded job's ranks that had not exited when rank 0 reported), so it keeps at most its plan's
    pods; those being deleted get `settle` seconds to go before they count as stuck."""
    deadline = time.monotonic() + settle
    while (mine := pods(cluster, ns, name)) and not all(ended(p) for p in mine) and time.monotonic() < deadline:
        time.sleep(2)
    problems = []
    names = [p["metadata"]["name"] for p in mine]
    want = len((st.get("plan") or {}).get("pods") or []) if st.get("phase") == "Succeeded" else None
    if len(names) != len(set(names)) or (want is not None and len(mine) > want):
        # Each pod's phase and node says which rule left it, for whoever reads the failure.
        seen = [(p["metadata"]["name"], p.get("status", {}).get("phase"), p["spec"].get("nodeName")) for p in mine]
        problems.append(f"{name}: pods (name, phase, node) {seen}, plan has {want}")
    uid = get(cluster, ns, name)["metadata"]["uid"]
    for p in mine:
        owners = {r["uid"] for r in p["metadata"].get("ownerReferences") or []}
        attempt = p["metadata"]["labels"].get("tabjob.dev/attempt")
        # Every failure (a restart) and every Kueue eviction (a requeue) starts a new attempt.
        if owners != {uid} or attempt != str(int(st.get("restarts") or 0) + int(st.get("requeues") or 0)):
            problems.append(f"{name}: orphan or stale pod {p['metadata']['name']} (attempt {attempt})")
        if not ended(p):
            where = f"{p.get('status', {}).get('phase')}, {p['spec'].get('nodeName')}"
            problems.append(f"{name}: pod {p['metadata']['name']} ({where}) running or Terminating {settle:.0f} s on")
    return problems


def status_problems(name: str, st: dict[str, Any], generation: int) -> list[str]:
    """Fields a finished job's status must have whatever happened on the way (none lost to a fault)."""
    problems = []
    if st.get("observedGeneration") != generation:
        problems.append(f"{name}: observedGeneration {st.get('observedGeneration')} != generation {generation}")
    if st.get("phase") == "Succeeded":
        progress = st.get("progress") or {}
        if not (progress.get("fitsDone") == progress.get("fitsTotal") and progress.get("fitsTotal")):
            problems.append(f"{name}: progress {progress} on a Succeeded job")
        if not st.get("models") or st.get("bestModel") is None or not isinstance(st.get("score"), float):
            problems.append(f"{name}: Succeeded without its leaderboard: {json.dumps(st)[:300]}")
        if not st.get("completionTime"):
            problems.append(f"{name}: Succeeded without completionTime")
    return problems


def record(scenario: str, figures: str) -> None:
    """One line per run in bench/results/chaos.log (the figures RELIABILITY.md quotes)."""
    print(f"{scenario}: {figures}")
    LOG.parent.mkdir(exist_ok=True)
    with open(LOG, "a") as out:
        out.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {scenario}: {figures}\n")
