"""Two `tabjob operator --leader-elect` replicas with jobs in flight, the leader SIGKILLed again and again (each
time it comes back as the standby): every job reaches the verdict it reaches without the kills, no restart is
charged to a job, 0 duplicate or orphan pods; the failover (kill -> the other replica holds the Lease, and -> its
first reconcile pass) is measured each time.

Bounded and self-stopping: KILLS kills, the next only once the other replica leads; then every job must be
finished within DEADLINE.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import statistics
import time
from pathlib import Path

import pytest

from tests.chaos.checks import pod_problems, record, status_problems, verdict, wait_finished
from tests.chaos.test_apiserver_restart import jobs
from tests.cluster.fixtures import Cluster
from tests.e2e.children import spawn
from tests.e2e.conftest import TRAINER_IMAGE, Operator, _free_port
from tests.e2e.jobs import get

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
KILLS = 4
DEADLINE = 600.0  # seconds, from the last kill until every job is finished
PASSES = re.compile(r"^tabjob_reconcile_duration_seconds_count (\S+)$", re.M)


class Replica(Operator):
    """One replica as the chart runs it: leader election on a Lease in the namespace it watches."""

    def __init__(self, cluster: Cluster, log: Path, namespace: str) -> None:
        super().__init__(cluster, log)
        self.namespace = namespace

    def start(self) -> None:
        self.health_port, self.metrics_port = _free_port(), _free_port()
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig), "TABJOB_TRAINER_IMAGE": TRAINER_IMAGE}
        argv = [
            str(REPO / ".venv" / "bin" / "tabjob"), "operator", "--namespace", self.namespace,
            "--leader-elect", "--lease-namespace", self.namespace, "--lease-name", "tabjob-chaos",
            "--retry-base-delay", "2", "--progress-interval", "5",
            "--metrics-port", str(self.metrics_port), "--health-port", str(self.health_port),
        ]  # fmt: skip
        self.proc = spawn(argv, log=self.log, env=env, cwd=REPO)  # ends with this session, even on SIGTERM

    def scrape(self) -> str:
        try:
            return self.metrics()
        except OSError:
            return ""

    def leading(self) -> bool:
        return "tabjob_leader 1.0" in self.scrape()

    def passes(self) -> float:
        m = PASSES.search(self.scrape())
        return float(m.group(1)) if m else 0.0


@pytest.mark.timeout(DEADLINE + 900)
@pytest.mark.usefixtures("crd", "trainer_image")
def test_leader_sigkilled_repeatedly_changes_no_verdict(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    rng = random.Random(int(time.time()))
    expected = jobs()
    replicas = [Replica(cluster, tmp_path / f"replica-{i}.log", namespace) for i in range(2)]
    to_lease: list[float] = []
    to_pass: list[float] = []
    started = time.monotonic()
    try:
        for r in replicas:
            r.start()
        names = list(expected)
        for name in names:
            cluster.apply(expected[name][0], namespace)
        for _ in range(KILLS):
            leader = cluster.wait_for("a leader", lambda: next((r for r in replicas if r.leading()), None), 90)
            standby = next(r for r in replicas if r is not leader)
            cluster.wait_for("the standby up", lambda s=standby: bool(s.scrape()) and not s.leading(), 60)  # type: ignore[misc]
            time.sleep(rng.uniform(1.0, 8.0))  # a random instant of the leader's term
            before = standby.passes()
            killed = time.monotonic()
            leader.kill(signal.SIGKILL)
            cluster.wait_for("the standby leading", standby.leading, 90)
            to_lease.append(time.monotonic() - killed)
            # Its first pass after taking over: every job is re-queued on a new term, so one comes at once.
            cluster.wait_for("the new leader's first pass", lambda s=standby, b=before: s.passes() > b, 60)  # type: ignore[misc]
            to_pass.append(time.monotonic() - killed)
            leader.start()  # back, as the standby
        seen = wait_finished(cluster, namespace, names, DEADLINE)
    finally:
        for r in replicas:
            r.kill(signal.SIGTERM)
    wall = time.monotonic() - started

    problems = []
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
    lease = json.loads(cluster.kubectl("get", "lease", "-n", namespace, "tabjob-chaos", "-o", "json").stdout)
    if lease["spec"].get("leaseTransitions", 0) < KILLS:
        problems.append(f"leaseTransitions {lease['spec'].get('leaseTransitions')} < {KILLS} kills")
    record(
        "leader killed",
        f"kills {KILLS}, jobs {len(expected)}, verdicts changed {changed}, kill -> standby leads "
        f"{', '.join(f'{s:.1f}' for s in to_lease)} s (median {statistics.median(to_lease):.1f}), kill -> first "
        f"pass {', '.join(f'{s:.1f}' for s in to_pass)} s, wall {wall:.0f} s, problems {len(problems)}",
    )
    assert not problems, "\n".join(problems)
    # The Lease runs out (leaseDuration 15 s) plus at most a retry period (2 s) and a slow machine's margin.
    assert max(to_lease) < 15 + 2 + 8, to_lease
