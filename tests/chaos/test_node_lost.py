"""A node lost under a running job, twice: its kubelet stops (containerd and the pod keep running, the node goes
NotReady, its pods are evicted and stay Terminating, since no kubelet confirms), first in attempt 0, then in the
retry. With runPolicy.backoffLimit 1 the first loss is retried (restarts 1, lastFailure naming the lost pod) and the
second fails the job (BackoffLimitExceeded, naming the pod). Then nothing may be left stuck: every pod of the job
gone or going within the operator's lost-pod bound while the nodes are still down, and all gone once they return.

The operator runs with TABJOB_LOST_POD_TIMEOUT=20 (tests/e2e/conftest.py): an operator setting (config.py, the
chart's env) that bounds how long a pod Terminating on a lost node past its grace period still counts as there.
The test cluster marks a silent node NotReady after 20 s and evicts its pods 30 s later (hack/cluster/README.md).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.checks import ended, record, verdict
from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator
from tests.e2e.jobs import job, pods, status, wait_phase

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]
NAME = "lost"
GRACE = 30  # the pods' terminationGracePeriodSeconds (the default)
LOST_AFTER = 20  # TABJOB_LOST_POD_TIMEOUT of the operator this test starts
# Long enough that no attempt finishes before its lost node is noticed (a pod on a lost node keeps running).
SLOW = {"NN_TORCH": [{"hyperparameters": {"num_epochs": 2000}}]}


@pytest.fixture
def stopped_kubelets(cluster: Cluster) -> Iterator[list[str]]:
    stopped: list[str] = []
    yield stopped
    for node in stopped:
        cluster.start_kubelet(node)
    for node in stopped:
        cluster.wait_for(f"{node} Ready again", lambda n=node: cluster.node_ready(n), timeout=180)  # type: ignore[misc]


def _lose_node_of_rank(cluster: Cluster, ns: str, rank: str, attempt: int, stopped: list[str]) -> tuple[set[str], str]:
    """Stop the kubelet of the node running `rank` of `attempt`; returns that attempt's pods on the node (the other
    rank may share it: 2 CPUs a node, 1 a pod, and either may then be the failure reported) and the node."""

    def running() -> dict[str, Any] | None:
        for p in pods(cluster, ns, NAME):
            labels = p["metadata"]["labels"]
            if (labels["tabjob.dev/rank"], labels["tabjob.dev/attempt"]) == (rank, str(attempt)):
                ok = p["status"].get("phase") == "Running" and p["spec"].get("nodeName") not in stopped
                return p if ok else None
        return None

    pod = cluster.wait_for(f"rank {rank} of attempt {attempt} running", running, timeout=300)
    node = str(pod["spec"]["nodeName"])
    stopped.append(node)
    cluster.stop_kubelet(node)
    attempt_pods = [p for p in pods(cluster, ns, NAME) if p["metadata"]["labels"]["tabjob.dev/attempt"] == str(attempt)]
    return {str(p["metadata"]["name"]) for p in attempt_pods if p["spec"].get("nodeName") == node}, node


@pytest.mark.timeout(1500)
@pytest.mark.usefixtures("crd", "trainer_image")
def test_a_node_lost_twice_retries_then_fails_per_backoff_limit_and_leaves_nothing_stuck(
    cluster: Cluster, namespace: str, stopped_kubelets: list[str], tmp_path: Path
) -> None:
    op = Operator(cluster, tmp_path / "operator.log")
    op.start()
    started = time.monotonic()
    problems: list[str] = []
    try:
        manifest = job(
            NAME, models=SLOW, resources={"cpus": 2, "cpusPerPod": 1, "memory": "4Gi"}, runPolicy={"backoffLimit": 1}
        )
        cluster.apply(manifest, namespace)
        wait_phase(cluster, namespace, NAME, "Running", timeout=300)
        first, node1 = _lose_node_of_rank(cluster, namespace, "1", 0, stopped_kubelets)
        lost1 = time.monotonic()
        st = cluster.wait_for(
            "a retry after the first lost node",
            lambda: s if int((s := status(cluster, namespace, NAME)).get("restarts") or 0) >= 1 else None,
            timeout=300,
        )
        to_retry = time.monotonic() - lost1
        if not any(p in (st.get("lastFailure") or "") for p in first):
            problems.append(f"lastFailure {st.get('lastFailure')!r} does not name a lost pod of {sorted(first)}")
        # The retry waits for the lost pod (force-deleted past its grace period plus the bound), then runs.
        second, node2 = _lose_node_of_rank(cluster, namespace, "1", 1, stopped_kubelets)
        lost2 = time.monotonic()
        st = wait_phase(cluster, namespace, NAME, "Failed", timeout=300)
        to_fail = time.monotonic() - lost2
        phase, reason = verdict(st)
        failed: dict[str, Any] = next((c for c in st.get("conditions") or [] if c["type"] == "Failed"), {})
        named = any(p in (failed.get("message") or "") for p in second)
        if (phase, reason) != ("Failed", "BackoffLimitExceeded") or not named:
            problems.append(
                f"verdict {phase}/{reason} {failed.get('message')!r}, want BackoffLimitExceeded naming {sorted(second)}"
            )
        if st.get("restarts") != 1:
            problems.append(f"restarts {st.get('restarts')} != 1 (backoffLimit 1)")
        # Nothing stuck while the nodes are still down: within grace + bound (+ a pass) the job's pods are gone or
        # have ended on a live node (a finished job keeps those, as a Job does; it deletes the rest).
        bound = GRACE + LOST_AFTER + 30
        try:
            cluster.wait_for(
                "the failed job's pods gone or ended with the nodes still down",
                lambda: all(ended(p) for p in pods(cluster, namespace, NAME)),
                timeout=bound,
            )
        except AssertionError:
            left = [
                (p["metadata"]["name"], p["spec"].get("nodeName"), bool(p["metadata"].get("deletionTimestamp")),
                 p.get("status", {}).get("phase"))
                for p in pods(cluster, namespace, NAME)
            ]  # fmt: skip
            problems.append(f"{bound} s after the verdict, pods (name, node, terminating, phase) still there: {left}")
        after = status(cluster, namespace, NAME)
        if verdict(after) != (phase, reason) or after.get("restarts") != 1:
            problems.append(f"the verdict moved after the fact: {json.dumps(after)[:400]}")
    finally:
        op.kill(signal.SIGTERM)
    wall = time.monotonic() - started
    record(
        "node lost",
        f"nodes lost {len(stopped_kubelets)} ({node1}, {node2}), lost -> retry {to_retry:.0f} s, "
        f"lost -> Failed {to_fail:.0f} s, verdict {phase}/{reason}, restarts {st.get('restarts')}, "
        f"wall {wall:.0f} s, problems {len(problems)}",
    )
    assert not problems, "\n".join(problems) + f"\nstatus: {json.dumps(st)[:1500]}"
