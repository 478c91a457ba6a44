"""kube-apiserver restarted under load: jobs in flight (children being created, pods running, verdicts being
written) while the API server is killed (SIGKILL, a crash) or stopped (SIGTERM) and started again, three times.

Nothing may be lost: each job reaches the verdict it reaches without the restarts, with its status whole
(observedGeneration, progress, leaderboard), no restart charged to it (the trainer never talks to the API server),
exactly its plan's pods, none orphaned, none left Terminating, and the operator process alive throughout (it waits
the outage out; it does not exit or crash-loop).

Bounded and self-stopping: the restarts come at fixed points; then every job must be finished within DEADLINE.
"""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.checks import pod_problems, record, status_problems, trainer_fails, verdict, wait_finished
from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator
from tests.e2e.jobs import get, job, slow_job

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]
DEADLINE = 600.0  # seconds, from the last restart until every job is finished
RESTARTS = [signal.SIGKILL, signal.SIGTERM, signal.SIGKILL]
DOWN = (3.0, 12.0)  # how long the API server stays down, seconds


def jobs() -> dict[str, tuple[dict[str, Any], tuple[str, str]]]:
    """name -> (manifest, (phase, reason) it reaches with no fault at all)."""
    one_pod = {"cpus": 1, "memory": "2Gi"}
    return {
        "ok-a": (job("ok-a", resources=one_pod), ("Succeeded", "Succeeded")),
        "slow-two-pods": (slow_job("slow-two-pods"), ("Succeeded", "Succeeded")),  # running across restarts
        "ok-b": (job("ok-b", resources=one_pod), ("Succeeded", "Succeeded")),
        "no-table": (trainer_fails("no-table", resources=one_pod), ("Failed", "NonZeroExit")),
        "invalid": (job("invalid", models={"GBM": [{"resources": {"cpus": 4}}]}), ("Failed", "InvalidSpec")),
        "suspended": (job("suspended", runPolicy={"suspend": True}), ("Suspended", "Suspended")),
    }


@pytest.mark.timeout(DEADLINE + 600)
@pytest.mark.usefixtures("crd", "trainer_image")
def test_apiserver_restarted_under_load_loses_no_status(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    rng = random.Random(int(time.time()))
    expected = jobs()
    op = Operator(cluster, tmp_path / "operator.log")
    op.start()
    started = time.monotonic()
    outages: list[float] = []
    try:
        names = list(expected)
        first, rest = names[: len(names) // 2], names[len(names) // 2 :]
        for name in first:
            cluster.apply(expected[name][0], namespace)
        time.sleep(1.0)  # the first restart lands while the operator creates the first jobs' children
        for n, sig in enumerate(RESTARTS):
            down = time.monotonic()
            cluster.stop_apiserver(sig)
            time.sleep(rng.uniform(*DOWN))
            cluster.start_apiserver()
            outages.append(time.monotonic() - down)
            assert op.proc is not None and op.proc.poll() is None, f"the operator exited during outage {n + 1}"
            if n == 0:
                for name in rest:
                    cluster.apply(expected[name][0], namespace)
            time.sleep(rng.uniform(5.0, 20.0))  # pods start, run, finish between the restarts
        seen = wait_finished(cluster, namespace, names, DEADLINE)
        alive = op.proc is not None and op.proc.poll() is None
        health = op.metrics() if alive else ""
    finally:
        op.kill(signal.SIGTERM)
    wall = time.monotonic() - started

    problems = [] if alive else ["the operator exited"]
    if alive and "tabjob_reconcile_duration_seconds_count" not in health:
        problems.append("the operator's metrics lost its reconcile counter")
    changed = 0
    for name, (_, want) in expected.items():
        st = seen[name]
        if verdict(st) != want:
            changed += 1
            problems.append(f"{name}: verdict {verdict(st)} != {want}: {json.dumps(st)[:400]}")
        if st.get("restarts"):
            problems.append(f"{name}: restarted {st['restarts']} time(s): {st.get('lastFailure')}")
        problems += pod_problems(cluster, namespace, name, st)
        problems += status_problems(name, st, get(cluster, namespace, name)["metadata"]["generation"])
    record(
        "apiserver restarted",
        f"restarts {len(outages)} ({', '.join(signal.Signals(s).name for s in RESTARTS)}), outages "
        f"{', '.join(f'{o:.0f}' for o in outages)} s, jobs {len(expected)}, verdicts changed {changed}, "
        f"operator exits {0 if alive else 1}, wall {wall:.0f} s, problems {len(problems)}",
    )
    assert not problems, "\n".join(problems)
