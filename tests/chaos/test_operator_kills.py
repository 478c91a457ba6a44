"""The operator SIGKILLed at random instants while jobs run: no duplicate or orphan pod, and every job reaches the
verdict it reaches without the kills (its restarts untouched: a kill is never a trainer failure).

Bounded and self-stopping: one job is applied per life of the operator (so kills land while children are being
created), and it kills until every job is applied and finished and at least MIN_RECONCILES passes ran across the
operator's lives, or DEADLINE runs out (a failure). Figures (kills, passes, wall time) go to bench/results/chaos.log
and RELIABILITY.md.
"""

from __future__ import annotations

import json
import random
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.checks import trainer_fails
from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator
from tests.e2e.jobs import get, job, pods, status

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
MIN_RECONCILES = 50
DEADLINE = 600.0  # seconds
PASSES = re.compile(r"^tabjob_reconcile_duration_seconds_count (\S+)$", re.M)


def _jobs() -> dict[str, tuple[dict[str, Any], str, str]]:
    """name -> (manifest, expected phase, expected reason): what each reaches with no kill at all."""
    one_pod = {"cpus": 1, "memory": "1Gi"}
    return {
        "ok-a": (job("ok-a", resources=one_pod), "Succeeded", "Succeeded"),
        "invalid-a": (job("invalid-a", models={"GBM": [{"resources": {"cpus": 4}}]}), "Failed", "InvalidSpec"),
        "ok-b": (job("ok-b", resources=one_pod), "Succeeded", "Succeeded"),
        "suspended-a": (job("suspended-a", runPolicy={"suspend": True}), "Suspended", "Suspended"),
        "ok-two-pods": (job("ok-two-pods"), "Succeeded", "Succeeded"),
        "ok-c": (job("ok-c", resources=one_pod), "Succeeded", "Succeeded"),
        # The trainer's own verdict (its table is not there): exit 1-127 fails the job at once.
        "no-table": (trainer_fails("no-table", resources=one_pod), "Failed", "NonZeroExit"),
        "invalid": (job("invalid", models={"GBM": [{"resources": {"cpus": 4}}]}), "Failed", "InvalidSpec"),
        "suspended": (job("suspended", runPolicy={"suspend": True}), "Suspended", "Suspended"),
    }


def _passes(op: Operator) -> float:
    try:
        m = PASSES.search(op.metrics())
    except OSError:
        return 0.0
    return float(m.group(1)) if m else 0.0


def _finished(cluster: Cluster, ns: str, names: list[str]) -> bool:
    for name in names:
        st = status(cluster, ns, name)
        if st.get("phase") not in ("Succeeded", "Failed", "Suspended"):
            return False
        if st.get("phase") == "Suspended" and st.get("observedGeneration") is None:
            return False
    return True


@pytest.mark.timeout(DEADLINE + 120)
@pytest.mark.usefixtures("crd")
def test_operator_sigkilled_at_random_points(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    rng = random.Random(int(time.time()))
    op = Operator(cluster, tmp_path / "operator.log")
    expected = _jobs()
    to_apply = [manifest for manifest, _, _ in expected.values()]
    started = time.monotonic()
    kills, passes = 0, 0.0
    op.start()
    try:
        while True:
            if to_apply:
                cluster.apply(to_apply.pop(0), namespace)
            life_end = time.monotonic() + rng.uniform(0.3, 4.0)  # a random instant of this life
            seen = 0.0
            while time.monotonic() < life_end:
                seen = max(seen, _passes(op))
                time.sleep(0.1)
            done = passes + seen >= MIN_RECONCILES and not to_apply and _finished(cluster, namespace, list(expected))
            if done or time.monotonic() - started > DEADLINE:
                passes += max(seen, _passes(op))
                break
            op.kill(signal.SIGKILL)
            kills += 1
            passes += seen
            op.start()
    finally:
        op.kill(signal.SIGTERM)
    wall = time.monotonic() - started
    assert time.monotonic() - started <= DEADLINE + 60, "the jobs never all finished"

    problems = []
    for name, (_, phase, reason) in expected.items():
        st = status(cluster, namespace, name)
        got = (st.get("phase"), next((c["reason"] for c in st["conditions"] if c["type"] == phase), None))
        if got != (phase, reason):
            problems.append(f"{name}: {got} != {(phase, reason)}: {json.dumps(st)[:400]}")
        if st.get("restarts"):
            problems.append(f"{name}: restarted {st['restarts']} time(s): {st.get('lastFailure')}")
        mine = pods(cluster, namespace, name)
        want = len((st.get("plan") or {}).get("pods") or []) if phase == "Succeeded" else None
        names = [p["metadata"]["name"] for p in mine]
        if len(names) != len(set(names)) or (want is not None and len(mine) != want):
            problems.append(f"{name}: pods {names}, plan wants {want}")  # a duplicate
        uid = get(cluster, namespace, name)["metadata"]["uid"]
        for p in mine:
            owners = {r["uid"] for r in p["metadata"].get("ownerReferences") or []}
            attempt = p["metadata"]["labels"].get("tabjob.dev/attempt")
            if owners != {uid} or attempt != str(st.get("restarts") or 0):
                problems.append(f"{name}: orphan or stale pod {p['metadata']['name']}")
    figures = f"kills {kills}, reconciles {passes:.0f}, jobs {len(expected)}, wall {wall:.0f} s"
    figures += f", problems {len(problems)}"
    print(figures)
    (REPO / "bench" / "results").mkdir(exist_ok=True)
    with open(REPO / "bench" / "results" / "chaos.log", "a") as out:
        out.write(figures + "\n")
    assert kills >= len(expected) - 1 and passes >= MIN_RECONCILES, figures
    assert not problems, "\n".join(problems)
