"""TabularJobs admitted by the test cluster's real Kueue (make cluster installs it; docs/kueue.md).

Each test makes its own ResourceFlavor, ClusterQueue and LocalQueue (named after its namespace) and PriorityClasses,
and reads only what a user sees: the jobs' status, their pods and Kueue's Workloads. GPU jobs run on CPU
(`onGpuUnavailable: FallbackToCPU`): the cluster's GPUs are fake.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import REPO, Operator
from tests.e2e.jobs import condition, get, job, status, wait_condition, wait_phase

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
KUEUE = "kueue.x-k8s.io/v1beta2"
PRIORITIES = {"tj-e2e-low": 100, "tj-e2e-high": 1000}


def gpu_job(name: str, queue: str, priority: str, pods: int = 2, epochs: int = 60, **spec: Any) -> dict[str, Any]:
    """`pods` pods x 1 GPU, a NN_TORCH fit per fold: tens of seconds on CPU."""
    return job(
        name,
        resources={"cpus": pods, "gpus": pods, "gpusPerPod": 1, "memory": f"{2 * pods}Gi"},
        models={"NN_TORCH": [{"resources": {"cpus": 1, "gpus": 1}, "hyperparameters": {"num_epochs": epochs}}]},
        bagging={"folds": max(2, pods)},
        onGpuUnavailable="FallbackToCPU",
        scheduling={"queueName": queue, "priorityClassName": priority},
        **spec,
    )


def make_queues(cluster: Cluster, ns: str, resource: str, quota: int, node_labels: dict[str, str] | None = None) -> str:
    """A flavor, a ClusterQueue with `quota` of `resource` (and room in CPU and memory) that preempts lower
    priorities, and a LocalQueue `q` in `ns` pointing at it. Returns the ClusterQueue's name."""
    flavor: dict[str, Any] = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": ns}, "spec": {}}
    if node_labels:
        flavor["spec"]["nodeLabels"] = node_labels
    cq = {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": ns},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", resource],
                    "flavors": [
                        {
                            "name": ns,
                            "resources": [
                                {"name": "cpu", "nominalQuota": 6},
                                {"name": "memory", "nominalQuota": "24Gi"},
                                {"name": resource, "nominalQuota": quota},
                            ],
                        }
                    ],
                }
            ],
        },
    }
    lq = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "q"}, "spec": {"clusterQueue": ns}}
    pcs = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in PRIORITIES.items()
    ]
    cluster.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in [flavor, cq, *pcs]))
    cluster.apply(lq, ns)
    return ns


@pytest.fixture
def cleanup_queues(cluster: Cluster, namespace: str) -> Iterator[None]:
    yield
    cluster.kubectl("delete", "clusterqueue,resourceflavor", namespace, "--wait=false", check=False)


class GpuSampler:
    """Every second: the GPUs requested by the namespace's admitted (ungated), not-terminating, unfinished pods."""

    def __init__(self, cluster: Cluster, ns: str, resource: str = "nvidia.com/gpu") -> None:
        self.cluster, self.ns, self.resource = cluster, ns, resource
        self.peak, self.samples = 0, 0
        self.seen: list[tuple[int, list[str]]] = []  # (GPUs, pods) per sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                pods = self.cluster.kube.get(f"/api/v1/namespaces/{self.ns}/pods")["items"]
            except Exception:  # an API hiccup is a missed sample, not a result
                continue
            used, names = 0, []
            for pod in pods:
                spec, phase = pod["spec"], pod.get("status", {}).get("phase")
                done = phase in ("Succeeded", "Failed")
                if pod["metadata"].get("deletionTimestamp") or spec.get("schedulingGates") or done:
                    continue
                for c in spec["containers"]:
                    used += int((c.get("resources", {}).get("limits") or {}).get(self.resource, 0))
                names.append(pod["metadata"]["name"])
            self.samples += 1
            self.peak = max(self.peak, used)
            self.seen.append((used, names))


def admitted(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    return condition(status(cluster, ns, name), "Admitted")


def wait_admission(cluster: Cluster, ns: str, name: str, reason: str, timeout: float = 180) -> dict[str, Any]:
    return cluster.wait_for(
        f"{name}'s Admitted condition to say {reason}",
        lambda: c if (c := admitted(cluster, ns, name)).get("reason") == reason else None,
        timeout,
    )


def workloads(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    return list(json.loads(cluster.kubectl("get", "workloads", "-n", ns, "-o", "json").stdout)["items"])


def tabjob_status(ns: str, name: str) -> str:
    """`tabjob status NAME` as a user runs it (KUBECONFIG is the test cluster's for the session)."""
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "tabjob"), "status", name, "-n", ns],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def wait_position(ns: str, name: str, line: str, timeout: float = 60) -> str:
    """Until `tabjob status` prints `line` (Kueue's visibility API lists a Workload once all the group's pods exist
    and its scheduler has tried it)."""
    deadline = time.monotonic() + timeout
    while True:
        out = tabjob_status(ns, name)
        if line in out or time.monotonic() > deadline:
            assert line in out, out
            return out
        time.sleep(1)


def test_quota_queue_inadmissible_and_preemption(
    cluster: Cluster, operator: Operator, namespace: str, cleanup_queues: None
) -> None:
    ns = namespace
    make_queues(cluster, ns, "nvidia.com/gpu", 2)
    with GpuSampler(cluster, ns) as sampler:
        # First, on an empty queue: Kueue then weighs all 3 pods against the quota and says the group exceeds its
        # maximum (with the quota in use it would stop at the first pod: "insufficient unused quota", Queued).
        cluster.apply(gpu_job("big", "q", "tj-e2e-low", pods=3), ns)
        inadmissible = wait_admission(cluster, ns, "big", "Inadmissible")
        assert "nvidia.com/gpu" in inadmissible["message"], inadmissible
        assert condition(status(cluster, ns, "big"), "Stalled")["status"] == "True"
        cluster.kubectl("delete", "tabularjob", "big", "-n", ns)

        cluster.apply(gpu_job("low", "q", "tj-e2e-low", epochs=400), ns)
        wait_admission(cluster, ns, "low", "Admitted")
        wait_phase(cluster, ns, "low", "Running")

        cluster.apply(gpu_job("other", "q", "tj-e2e-low"), ns)
        queued = wait_admission(cluster, ns, "other", "Queued")
        assert status(cluster, ns, "other")["phase"] == "Pending"
        table = cluster.kubectl("get", "tabularjobs", "-n", ns).stdout
        assert "Queued" in table and "Admitted" in table, table

        cluster.apply(gpu_job("high", "q", "tj-e2e-high"), ns)
        preempted = wait_admission(cluster, ns, "low", "Preempted", timeout=120)
        assert "Preempted" in preempted["message"] or "prioritization" in preempted["message"], preempted
        for name in ("high", "other", "low"):
            wait_condition(cluster, ns, name, "Succeeded", timeout=900)
        final = status(cluster, ns, "low")
        assert final.get("restarts", 0) == 0 and "lastFailure" not in final, final
        assert final.get("requeues", 0) >= 1, final
        assert queued["status"] == "False"
    assert sampler.samples > 30
    assert sampler.peak <= 2, [s for s in sampler.seen if s[0] > 2][:5]
    events = cluster.kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=low").stdout
    assert "Preempted" in events and "Admitted" in events, events


def test_mig_flavor_admits_a_mig_job(
    cluster: Cluster, operator: Operator, namespace: str, cleanup_queues: None
) -> None:
    mig = "nvidia.com/mig-1g.10gb"
    make_queues(cluster, namespace, mig, 2, node_labels={"kubernetes.io/hostname": "gpu-node-2"})
    manifest = gpu_job("mig", "q", "tj-e2e-low", pods=1, epochs=5)
    manifest["spec"]["resources"]["gpuResource"] = mig
    cluster.apply(manifest, namespace)
    wait_condition(cluster, namespace, "mig", "Succeeded", timeout=300)
    assert admitted(cluster, namespace, "mig")["status"] == "True"
    (wl,) = workloads(cluster, namespace)
    assignment = wl["status"]["admission"]["podSetAssignments"][0]
    assert assignment["flavors"][mig] == namespace, assignment
    (pod,) = [p for p in get_pods(cluster, namespace) if p["metadata"]["labels"].get("tabjob.dev/job-name") == "mig"]
    assert pod["spec"]["nodeName"] == "gpu-node-2"
    assert pod["spec"]["containers"][0]["resources"]["limits"][mig] == "1"


def get_pods(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    return list(json.loads(cluster.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"])


def test_pods_that_cannot_start_are_evicted_by_wait_for_pods_ready_and_requeued(
    cluster: Cluster, operator: Operator, namespace: str, cleanup_queues: None
) -> None:
    make_queues(cluster, namespace, "nvidia.com/gpu", 2)
    # The output claim does not exist: admitted, the pods never leave Pending, so never become ready.
    output = {"path": "/output/stuck", "volume": {"persistentVolumeClaim": {"claimName": "missing"}}}
    cluster.apply(gpu_job("stuck", "q", "tj-e2e-low", pods=1, output=output), namespace)
    wait_admission(cluster, namespace, "stuck", "Admitted")
    evicted = wait_admission(cluster, namespace, "stuck", "Preempted", timeout=180)
    assert "PodsReadyTimeout" in evicted["message"] or "ready" in evicted["message"].lower(), evicted
    st = status(cluster, namespace, "stuck")
    assert st.get("restarts", 0) == 0 and st["requeues"] >= 1 and st["phase"] == "Pending", st
    # Requeued: a new group's pods exist and wait for admission again (Kueue's back-off first).
    cluster.wait_for(
        "the next group's pods",
        lambda: [p for p in get_pods(cluster, namespace) if p["metadata"]["name"].endswith("-r1")] or None,
        timeout=120,
    )
    assert get(cluster, namespace, "stuck")["status"].get("restarts", 0) == 0


def test_priority_preemption_of_a_group_that_never_ran(
    cluster: Cluster, operator: Operator, namespace: str, cleanup_queues: None
) -> None:
    """Admission and preemption alone, in seconds: the pods select a node label no node has, so they never start
    (the trainer plays no part) and Kueue's decisions are all there is to see."""
    ns = namespace
    make_queues(cluster, ns, "nvidia.com/gpu", 2)

    def nowhere(name: str, priority: str) -> dict[str, Any]:
        manifest = gpu_job(name, "q", priority)
        manifest["spec"]["scheduling"]["nodeSelector"] = {"tabjob.dev/e2e-nowhere": "true"}
        return manifest

    cluster.apply(nowhere("low", "tj-e2e-low"), ns)
    wait_admission(cluster, ns, "low", "Admitted")
    cluster.apply(nowhere("other", "tj-e2e-low"), ns)
    queued = wait_admission(cluster, ns, "other", "Queued")
    assert "nvidia.com/gpu" in queued["message"] or "Workload" in queued["message"], queued
    # `tabjob status` names the queue and, from Kueue's visibility API, the job's place in it.
    out = wait_position(
        ns, "other", "Position in LocalQueue q: 1 of 1 pending (1 in its ClusterQueue; Workload other-0"
    )
    assert "Kueue LocalQueue q: Queued" in out, out
    assert "Position" not in tabjob_status(ns, "low")  # admitted: no place in a queue to show
    # A queue the visibility API cannot answer for (the LocalQueue does not exist): one line says so, status works.
    lost = nowhere("lost", "tj-e2e-low")
    lost["spec"]["scheduling"]["queueName"] = "missing"
    cluster.apply(lost, ns)
    out = wait_position(ns, "lost", "Position in LocalQueue missing: unknown (Kueue's visibility API did not answer:")
    assert "HTTP 404" in out and "[bold]" not in out, out
    cluster.kubectl("delete", "tabularjob", "lost", "-n", ns)
    cluster.apply(nowhere("high", "tj-e2e-high"), ns)
    preempted = wait_admission(cluster, ns, "low", "Preempted", timeout=60)
    wait_admission(cluster, ns, "high", "Admitted", timeout=60)
    st = status(cluster, ns, "low")
    assert st.get("restarts", 0) == 0 and "lastFailure" not in st and st["requeues"] == 1, st
    assert st["phase"] == "Pending", st
    assert "prioritization" in preempted["message"] or "Preempted" in preempted["message"], preempted
    # One Workload per group, never two for the same group: low-0 (evicted), then low-1 once its pods exist.
    names = sorted(w["metadata"]["name"] for w in workloads(cluster, ns))
    assert names.count("low-0") <= 1 and names.count("low-1") <= 1 and "high-0" in names, names

    # The evicted group's pods go, and the next group's pods wait for admission again.
    def next_group_waits() -> bool | None:
        low = [p for p in get_pods(cluster, ns) if p["metadata"]["labels"].get("tabjob.dev/job-name") == "low"]
        attempts = {p["metadata"]["labels"]["tabjob.dev/attempt"] for p in low}
        return (attempts == {"1"} and all(p["spec"].get("schedulingGates") for p in low)) or None

    cluster.wait_for("low's next group, gated", next_group_waits, timeout=90)
