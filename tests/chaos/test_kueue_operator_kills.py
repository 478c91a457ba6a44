"""The operator SIGKILLed while Kueue admits a job and while it preempts one, and started again each time.

Three windows: in the first two, kills each after a life of 0.3-3 s at a random instant, a SIGKILL, a restart:
1. admission: `low` and `other` (same low priority, quota for one of them) are applied; kills go on until `low`'s
   group is admitted and its gates lifted and `other` waits Queued in Kueue (pods created, gated, its Workload
   pending or just admitted);
2. preemption: `high` arrives; kills go on until Kueue has evicted `low`, `low` has counted the eviction, `high` is
   admitted and `low`'s next group exists, gated;
3. an eviction the operator sleeps through: once `low`'s next group runs, `rival` (high) arrives, the operator is
   killed as soon as rival's pods exist and started again only once Kueue has evicted `low` and its pods are gone
   (their Workload goes with them), so only Kueue's `Stopped` Events on the pods tell what happened.
Then the operator runs undisturbed until every job finishes.

What must hold (docs/kueue.md, "An operator killed mid-admission or mid-preemption"): every second during the
run, no job has pods of two attempts alive at once, no job holds quota with two Workloads, and the GPUs of
admitted running pods never exceed the quota; at the end no job Failed, every one Succeeded with restarts 0, `low`
with requeues >= 2, each job's Workloads at most one per attempt (named <job>-<attempt>, the last one's present)
and all Finished, and no pod left gated, orphaned or of a stale attempt. Figures go to bench/results/chaos.log.
"""

from __future__ import annotations

import json
import random
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tabjob.controller.policy.kueue import job_of_workload
from tests.chaos.checks import pod_problems, record, status_problems, verdict, wait_finished
from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator
from tests.e2e.jobs import get, pods, status
from tests.e2e.test_kueue_e2e import GpuSampler, admitted, cleanup_queues, gpu_job, make_queues, workloads

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]
__all__ = ["cleanup_queues"]  # the fixture, used by name
DEADLINE = 900.0  # seconds, for the whole run
WINDOW = 180.0  # seconds, for each window of kills
MIN_KILLS = 4  # per window
QUOTA = 2  # GPUs: one 2-pod job at a time
JOBS = ["low", "other", "high", "rival"]


def _true(obj: dict[str, Any], ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )


class GroupSampler(threading.Thread):
    """Every second: a job with pods of two attempts alive, or two Workloads holding quota, is a violation."""

    def __init__(self, cluster: Cluster, ns: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.ns = cluster, ns
        self.samples = 0
        self.violations: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                pod_list = self.cluster.kube.get(f"/api/v1/namespaces/{self.ns}/pods")["items"]
                wls = workloads(self.cluster, self.ns)
            except Exception:  # an API hiccup is a missed sample, not a result
                continue
            attempts: dict[str, set[str]] = {}
            for p in pod_list:
                labels = p["metadata"].get("labels") or {}
                done = (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                if p["metadata"].get("deletionTimestamp") or done or "tabjob.dev/job-name" not in labels:
                    continue
                attempts.setdefault(labels["tabjob.dev/job-name"], set()).add(labels.get("tabjob.dev/attempt", "?"))
            holding: dict[str, list[str]] = {}
            for wl in wls:
                parsed = job_of_workload(wl["metadata"]["name"])
                if parsed and _true(wl, "QuotaReserved") and not _true(wl, "Finished"):
                    holding.setdefault(parsed[0], []).append(wl["metadata"]["name"])
            self.samples += 1
            when = time.strftime("%H:%M:%S")
            self.violations += [
                f"{when} {j}: pods of attempts {sorted(a)} alive" for j, a in attempts.items() if len(a) > 1
            ]
            self.violations += [f"{when} {j}: Workloads {w} hold quota" for j, w in holding.items() if len(w) > 1]


def kill_until(op: Operator, rng: random.Random, done: Callable[[], bool], what: str) -> int:
    """SIGKILL and restart the operator at random instants until `done()` (after at least MIN_KILLS kills)."""
    kills, deadline = 0, time.monotonic() + WINDOW
    while True:
        time.sleep(rng.uniform(0.3, 3.0))
        if kills >= MIN_KILLS and done():
            return kills
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached in {WINDOW:.0f} s ({kills} kills)")
        op.kill(signal.SIGKILL)
        kills += 1
        op.start()


def _live(cluster: Cluster, ns: str, name: str) -> list[dict[str, Any]]:
    return [p for p in pods(cluster, ns, name) if not p["metadata"].get("deletionTimestamp")]


def _gated(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("schedulingGates"))


@pytest.mark.timeout(DEADLINE + 300)
@pytest.mark.usefixtures("crd", "trainer_image", "cleanup_queues")
def test_operator_sigkilled_during_kueue_admission_and_preemption(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    ns, rng, started = namespace, random.Random(int(time.time())), time.monotonic()
    make_queues(cluster, ns, "nvidia.com/gpu", QUOTA)
    op = Operator(cluster, tmp_path / "operator.log")
    sampler = GroupSampler(cluster, ns)
    sampler.start()
    op.start()
    try:
        with GpuSampler(cluster, ns) as gpus:
            cluster.apply(gpu_job("low", "q", "tj-e2e-low", epochs=200), ns)
            cluster.apply(gpu_job("other", "q", "tj-e2e-low"), ns)

            def admission_settled() -> bool:
                low = _live(cluster, ns, "low")
                other_waits = admitted(cluster, ns, "other").get("reason") == "Queued" and any(
                    w["metadata"]["name"] == "other-0" for w in workloads(cluster, ns)
                )
                return len(low) == 2 and not any(map(_gated, low)) and other_waits

            admission_kills = kill_until(op, rng, admission_settled, "low admitted, other queued")

            cluster.apply(gpu_job("high", "q", "tj-e2e-high"), ns)

            def preemption_settled() -> bool:
                low, high = _live(cluster, ns, "low"), _live(cluster, ns, "high")
                requeued = status(cluster, ns, "low").get("requeues", 0) >= 1
                next_group = len(low) == 2 and all(p["metadata"]["labels"]["tabjob.dev/attempt"] == "1" for p in low)
                return (
                    requeued and next_group and all(map(_gated, low)) and len(high) == 2 and not any(map(_gated, high))
                )

            preemption_kills = kill_until(op, rng, preemption_settled, "low evicted and requeued, high admitted")

            # 3. The operator down through a whole eviction: low's next group runs, `rival` (high) has its pods
            # created and gated, the operator is killed and stays down until Kueue has evicted low and its pods
            # are gone; the operator learns of the eviction only from what is left on the cluster.
            def low_runs() -> bool:
                low = _live(cluster, ns, "low")
                return len(low) == 2 and all(p["status"].get("phase") == "Running" for p in low)

            cluster.wait_for("low's next group running", lambda: low_runs() or None, timeout=WINDOW * 2)
            cluster.apply(gpu_job("rival", "q", "tj-e2e-high"), ns)
            cluster.wait_for("rival's pods", lambda: len(_live(cluster, ns, "rival")) == 2 or None, timeout=60)
            op.kill(signal.SIGKILL)
            outage = time.monotonic()
            cluster.wait_for("low's pods gone", lambda: not _live(cluster, ns, "low") or None, timeout=WINDOW)
            outage = time.monotonic() - outage
            op.start()
            final = wait_finished(cluster, ns, JOBS, DEADLINE - (time.monotonic() - started))
    finally:
        op.kill(signal.SIGTERM)
        sampler.stop.set()
        sampler.join(timeout=10)
    wall = time.monotonic() - started

    problems = list(sampler.violations)
    if gpus.peak > QUOTA:
        problems.append(
            f"{gpus.peak} GPUs admitted at once, quota {QUOTA}: {[s for s in gpus.seen if s[0] > QUOTA][:3]}"
        )
    for name, st in final.items():
        if verdict(st) != ("Succeeded", "Succeeded") or st.get("restarts", 0) or st.get("lastFailure"):
            problems.append(f"{name}: {verdict(st)}, restarts {st.get('restarts')}: {json.dumps(st)[:400]}")
        problems += status_problems(name, st, get(cluster, ns, name)["metadata"]["generation"])
        problems += pod_problems(cluster, ns, name, st)
    if final["low"].get("requeues", 0) < 2:
        problems.append(f"low was never requeued: {final['low']}")
    problems += workload_problems(cluster, ns, final)
    gated = [p["metadata"]["name"] for p in cluster.kube.get(f"/api/v1/namespaces/{ns}/pods")["items"] if _gated(p)]
    if gated:
        problems.append(f"pods left gated: {gated}")
    record(
        "kueue-operator-kills",
        f"kills {admission_kills} in admission + {preemption_kills} in preemption + 1 down {outage:.0f} s through an"
        f" eviction, low requeues"
        f" {final['low'].get('requeues')}, samples {sampler.samples}, GPU peak {gpus.peak}/{QUOTA}, wall {wall:.0f} s,"
        f" problems {len(problems)}",
    )
    assert sampler.samples > 30 and gpus.samples > 30
    assert not problems, "\n".join(problems)


def workload_problems(cluster: Cluster, ns: str, final: dict[str, dict[str, Any]], settle: float = 60.0) -> list[str]:
    """At most one Workload per attempt of each job, named <job>-<attempt>, the last attempt's among them, its owners
    that attempt's pods, all Finished (`settle` seconds for Kueue to finish the last ones)."""
    deadline = time.monotonic() + settle
    wls = workloads(cluster, ns)
    while not all(_true(w, "Finished") for w in wls) and time.monotonic() < deadline:
        time.sleep(2)
        wls = workloads(cluster, ns)
    problems = [f"Workload {w['metadata']['name']} not Finished" for w in wls if not _true(w, "Finished")]
    for name, st in final.items():
        last = int(st.get("restarts") or 0) + int(st.get("requeues") or 0)
        mine = {w["metadata"]["name"] for w in wls if (job_of_workload(w["metadata"]["name"]) or ("",))[0] == name}
        # An evicted attempt's Workload may be gone: Kueue makes the pods its owners, so it goes with them.
        if f"{name}-{last}" not in mine or not mine <= {f"{name}-{a}" for a in range(last + 1)}:
            problems.append(f"{name}: Workloads {sorted(mine)} for attempts 0..{last}")
    for wl in wls:
        group = wl["metadata"]["name"]
        parsed = job_of_workload(group)
        if parsed is None:
            problems.append(f"Workload {group} is no TabularJob's group")
            continue
        job, attempt = parsed
        member = re.compile(rf"^{re.escape(job)}-\d+{f'-r{attempt}' if attempt else ''}$")
        owners = [r["name"] for r in wl["metadata"].get("ownerReferences") or [] if r.get("kind") == "Pod"]
        if strangers := [o for o in owners if not member.match(o)]:
            problems.append(f"Workload {group} owned by pods of another group: {strangers}")
    return problems
