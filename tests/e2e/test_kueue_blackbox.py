"""TabularJobs through Kueue, checked from the outside only, as a user of both would check them.

The test knows the TabularJob manifest format, the `Admitted` condition documented for it and Kueue's own objects;
it applies YAML with kubectl and reads nothing but pods, Kueue Workloads (kueue.x-k8s.io) and TabularJob status.
It builds its own ResourceFlavor, ClusterQueue (2 GPUs, StrictFIFO, no preemption) and LocalQueue, and its own
PriorityClasses, all named for this run.

Three 2-pod jobs of 1 GPU per pod, so one at a time fits: `first` (low priority) takes the quota; `early-low` (low)
and then `late-high` (high) wait. A once-a-second sampler watches every pod of the namespace throughout.

- all or nothing: the GPUs of admitted (ungated), live pods never exceed 2, and a job never has an ungated pod while
  another of its live pods is still gated for longer than GRACE (Kueue lifts a group's gates one pod at a time);
- a waiting job reads Admitted=False, reason Queued, and its message carries Kueue's own words;
- priority: `late-high`, queued after `early-low`, is admitted before it;
- every job Succeeded.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
QUOTA = 2
GRACE = 5.0  # seconds a job may be half ungated while Kueue lifts its gates
GPU = "nvidia.com/gpu"

QUEUES = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: {run}-low}}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: {run}-high}}
value: 10000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {run}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {run}}}
spec:
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ns}}}}}
  queueingStrategy: StrictFIFO
  resourceGroups:
    - coveredResources: [cpu, memory, nvidia.com/gpu]
      flavors:
        - name: {run}
          resources:
            - {{name: cpu, nominalQuota: 8}}
            - {{name: memory, nominalQuota: 32Gi}}
            - {{name: nvidia.com/gpu, nominalQuota: {quota}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: {run}-lq, namespace: {ns}}}
spec: {{clusterQueue: {run}}}
"""

JOB = """
apiVersion: tabjob.dev/v1alpha1
kind: TabularJob
metadata: {{name: {name}, namespace: {ns}}}
spec:
  data: {{train: "sklearn://breast_cancer", label: target}}
  output: {{path: /output/{name}}}
  resources: {{cpus: 2, gpus: 2, gpusPerPod: 1, memory: 4Gi}}
  models:
    NN_TORCH:
      - resources: {{cpus: 1, gpus: 1}}
        hyperparameters: {{num_epochs: {epochs}}}
  bagging: {{folds: 2}}
  onGpuUnavailable: FallbackToCPU
  scheduling:
    queueName: {run}-lq
    priorityClassName: {run}-{priority}
"""


def kubectl_json(cluster: Cluster, *args: str) -> dict[str, Any]:
    return dict(json.loads(cluster.kubectl(*args, "-o", "json").stdout))


def tabularjob(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    return kubectl_json(cluster, "get", "tabularjob", name, "-n", ns)


def admitted_condition(job: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (job.get("status") or {}).get("conditions") or [] if c["type"] == "Admitted"), {})


def owner_job(pod: dict[str, Any]) -> str | None:
    """The TabularJob a pod belongs to, from its owner references."""
    return next((r["name"] for r in pod["metadata"].get("ownerReferences") or [] if r["kind"] == "TabularJob"), None)


def live(pod: dict[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and pod["status"].get("phase") not in ("Succeeded", "Failed")


def gated(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("schedulingGates"))


def gpus(pod: dict[str, Any]) -> int:
    return sum(int((c.get("resources") or {}).get("limits", {}).get(GPU, 0)) for c in pod["spec"]["containers"])


class PodWatcher(threading.Thread):
    """Once a second, every pod of the namespace: GPUs admitted, half-admitted jobs, when each job was admitted."""

    def __init__(self, cluster: Cluster, ns: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.ns = cluster, ns
        self.samples, self.peak = 0, 0
        self.over_quota: list[tuple[int, list[str]]] = []
        self.half_since: dict[str, float] = {}
        self.half_admitted: list[str] = []
        self.admitted_at: dict[str, float] = {}  # job -> first sample with all its live pods ungated
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                pods = self.cluster.kube.get(f"/api/v1/namespaces/{self.ns}/pods")["items"]
            except Exception:  # an API hiccup is a missed sample, not a result
                continue
            now = time.monotonic()
            admitted = [p for p in pods if live(p) and not gated(p)]
            used = sum(gpus(p) for p in admitted)
            self.samples += 1
            self.peak = max(self.peak, used)
            if used > QUOTA:
                self.over_quota.append((used, [p["metadata"]["name"] for p in admitted]))
            by_job: dict[str, list[dict[str, Any]]] = {}
            for p in pods:
                if live(p) and (job := owner_job(p)):
                    by_job.setdefault(job, []).append(p)
            for job, mine in by_job.items():
                n_gated = sum(map(gated, mine))
                if 0 < n_gated < len(mine):
                    since = self.half_since.setdefault(job, now)
                    if now - since > GRACE:
                        self.half_admitted.append(f"{job}: {n_gated} of {len(mine)} pods gated for {now - since:.0f} s")
                else:
                    self.half_since.pop(job, None)
                if n_gated == 0:
                    self.admitted_at.setdefault(job, now)


@pytest.fixture
def run_id(cluster: Cluster) -> Iterator[str]:
    run = f"bb-{uuid.uuid4().hex[:6]}"
    yield run
    for kind in ("clusterqueue", "resourceflavor", "priorityclass"):
        names = [run] if kind != "priorityclass" else [f"{run}-low", f"{run}-high"]
        cluster.kubectl("delete", kind, *names, "--wait=false", "--ignore-not-found", check=False)


def wait_for(what: str, probe: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := probe():
            return found
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_kueue_from_the_outside(cluster: Cluster, operator: Operator, namespace: str, run_id: str) -> None:
    ns, run = namespace, run_id
    cluster.kubectl("apply", "-f", "-", input=QUEUES.format(run=run, ns=ns, quota=QUOTA))

    def apply_job(name: str, priority: str, epochs: int) -> None:
        manifest = JOB.format(name=name, ns=ns, run=run, priority=priority, epochs=epochs)
        cluster.kubectl("apply", "-f", "-", input=manifest)

    def condition(name: str) -> dict[str, Any]:
        return admitted_condition(tabularjob(cluster, ns, name))

    watcher = PodWatcher(cluster, ns)
    watcher.start()
    try:
        apply_job("first", "low", epochs=200)
        wait_for("first admitted", lambda: condition("first").get("status") == "True", 120)
        apply_job("early-low", "low", epochs=20)

        # Kueue's own words for a group that does not fit now, on the job's condition and on its Workload.
        def kueue_says_no_quota() -> dict[str, Any] | None:
            c = condition("early-low")
            return c if "insufficient unused quota" in c.get("message", "") else None

        waiting = wait_for("early-low Queued with Kueue's message", kueue_says_no_quota, 90)
        assert (waiting["status"], waiting["reason"]) == ("False", "Queued"), waiting
        assert GPU in waiting["message"], waiting
        assert tabularjob(cluster, ns, "early-low")["status"]["phase"] == "Pending"
        pods = kubectl_json(cluster, "get", "pods", "-n", ns)["items"]
        mine = {p["metadata"]["name"] for p in pods if owner_job(p) == "early-low"}
        assert len(mine) == 2 and all(gated(p) for p in pods if owner_job(p) == "early-low"), pods
        workloads = kubectl_json(cluster, "get", "workloads.kueue.x-k8s.io", "-n", ns)["items"]
        (wl,) = [w for w in workloads if {r["name"] for r in w["metadata"].get("ownerReferences") or []} == mine]
        reserved = next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")
        assert reserved["status"] == "False" and "insufficient unused quota" in reserved["message"], reserved

        time.sleep(2)  # late-high is created strictly after early-low
        apply_job("late-high", "high", epochs=20)
        wait_for("late-high Queued", lambda: condition("late-high").get("reason") == "Queued", 90)
        assert condition("first").get("status") == "True", "no preemption in this ClusterQueue"

        for name in ("first", "early-low", "late-high"):
            cluster.kubectl(
                "wait", "-n", ns, f"tabularjob/{name}", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=900s",
                timeout=930,
            )  # fmt: skip
    finally:
        watcher.stop.set()
        watcher.join(timeout=10)

    for name in ("first", "early-low", "late-high"):
        job = tabularjob(cluster, ns, name)
        assert job["status"]["phase"] == "Succeeded", job["status"]
        assert admitted_condition(job).get("status") == "True", job["status"]
    assert watcher.samples > 30, watcher.samples
    assert watcher.peak <= QUOTA and not watcher.over_quota, watcher.over_quota[:3]
    assert not watcher.half_admitted, watcher.half_admitted[:5]
    at = watcher.admitted_at
    assert at["first"] < at["late-high"] < at["early-low"], at
