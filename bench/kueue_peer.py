"""TabularJobs through Kueue beside Kueue's own batch/Job integration, on a running cluster with Kueue
(`make cluster`; KUBECONFIG set; the trainer image on the nodes). It applies the CRD from crds/ itself.

    .venv/bin/python -m bench.kueue_peer [--runs 20] [--preemptions 5] [--save kueue_peer]

Both kinds go through the same LocalQueue of a ClusterQueue this script makes (2 GPUs of quota, preemption of lower
priorities), with pods of the same shape: 2 pods of 1 CPU, 2Gi and 1 `nvidia.com/gpu` each, the trainer image.
The peer is an Indexed batch/v1 Job (completions = parallelism = 2) whose pods copy the TabularJob pods' image,
volumes, security context and grace period, and whose container keeps one CPU busy and exits on SIGTERM as
the trainer does.

1. admission: `kubectl apply` of one job -> every pod of it Running (the pod watch sees phase Running), one job at a
   time, the previous one deleted and its pods gone first; p50/p99 over --runs of each kind, alternately;
2. preemption: a low-priority job of the kind runs (--settle seconds, so it is at work: the TabularJob trains, the
   Job's pods each keep one CPU busy); a high-priority one of the same kind is applied -> every pod of the high one
   Running (Kueue evicts the low one, its pods terminate, the high one is admitted and starts);
   p50 over --preemptions of each kind.
Ratios are TabularJob / Job (above 1: the TabularJob is slower). The operator runs as a subprocess
(`tabjob operator -n NS`), as deployed. Results go to bench/results/NAME.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.envelope import envelope, write
from bench.operator_scale import free_port, install_crd, owner_job, pct, start_operator

REPO = Path(__file__).resolve().parents[1]

KUEUE = "kueue.x-k8s.io/v1beta2"
PRIORITIES = {"bench-kueue-low": 100, "bench-kueue-high": 1000}
TRAINER_IMAGE = os.environ.get("TABJOB_E2E_TRAINER_IMAGE", "ghcr.io/tabjob/tabjob-trainer:0.1.0-cpu")
# The peer's container: the trainer image, busy on one CPU as a training pod is (so the low job of each kind loads
# the 2-core test bed alike: a sleeping peer left the control plane idle CPUs a training TabularJob took), and gone
# at SIGTERM as the trainer is.
PEER_PLAN = "peer-plan"
BUSY = "import signal, sys\nsignal.signal(signal.SIGTERM, lambda *_: sys.exit(143))\nwhile True:\n    pass"


def queues(ns: str) -> list[dict[str, Any]]:
    cq = {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": ns},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": ns,
                            "resources": [
                                {"name": "cpu", "nominalQuota": 8},
                                {"name": "memory", "nominalQuota": "32Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": 2},
                            ],
                        }
                    ],
                }
            ],
        },
    }
    pcs = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in PRIORITIES.items()
    ]
    flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": ns}, "spec": {}}
    lq = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": ns},
          "spec": {"clusterQueue": ns}}  # fmt: skip
    return [flavor, cq, *pcs, lq]


def tabular_job(name: str, priority: str) -> dict[str, Any]:
    """2 pods x 1 GPU, training until deleted (no early stopping), so it is Running when measured and preempted."""
    return {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": name},
        "spec": {
            "data": {"train": "sklearn://breast_cancer", "label": "target"},
            "output": {"path": f"/output/{name}"},
            "resources": {"cpus": 2, "gpus": 2, "gpusPerPod": 1, "memory": "4Gi"},
            # no early stop: still training when preempted, however long the measurement waits
            "models": {
                "NN_TORCH": [
                    {"resources": {"cpus": 1, "gpus": 1}, "hyperparameters": {"num_epochs": 100000, "patience": 100000}}
                ]
            },
            "bagging": {"folds": 2},
            "onGpuUnavailable": "FallbackToCPU",
            "scheduling": {"queueName": "q", "priorityClassName": priority},
        },
    }


def batch_job(name: str, priority: str, like: dict[str, Any]) -> dict[str, Any]:
    """The Job peer. `like` is a TabularJob pod as the API server returned it; its spec is copied whole (the
    container with its env, ports, resources, mounts and security context; the volumes; placement; grace period)
    except what names that TabularJob or was set on it after creation: the command becomes a CPU-busy loop, the plan
    ConfigMap becomes the run's copy of it (PEER_PLAN), and hostname, node, gates and resolved priority go. The kubelet
    waits for a pod's volumes before it makes its sandbox, so a peer without the trainer's volumes would skip a wait
    the TabularJob's pods have."""
    spec = copy.deepcopy(like["spec"])
    for key in ("hostname", "subdomain", "nodeName", "schedulingGates", "priority", "preemptionPolicy"):
        spec.pop(key, None)
    spec["priorityClassName"] = priority
    for volume in spec.get("volumes") or []:
        if "configMap" in volume:
            volume["configMap"]["name"] = PEER_PLAN
    container = spec["containers"][0]
    container["command"] = ["python", "-c", BUSY]
    container.pop("args", None)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "completionMode": "Indexed",
            "completions": 2,
            "parallelism": 2,
            "backoffLimit": 0,
            "template": {"spec": spec},
        },
    }


def copy_plan(core: Any, ns: str, job: str) -> None:
    """PEER_PLAN: the TabularJob's plan ConfigMap under a name of the run's own, for the peer's pods to mount."""
    plan = core.read_namespaced_config_map(f"{job}-plan", ns)
    body = {"metadata": {"name": PEER_PLAN}, "data": plan.data}
    core.create_namespaced_config_map(ns, body)


class RunningWatch(threading.Thread):
    """When each job first had `want` pods Running at once (one pod watch on the namespace, as a client would)."""

    def __init__(self, core: Any, ns: str) -> None:
        super().__init__(daemon=True)
        self.core, self.ns = core, ns
        self.running: dict[str, set[str]] = {}
        self.all_running: dict[str, float] = {}
        self.lock = threading.Lock()

    def run(self) -> None:
        from kubernetes import watch

        while True:
            for ev in watch.Watch().stream(self.core.list_namespaced_pod, self.ns, timeout_seconds=300):
                pod, now = ev["object"], time.monotonic()
                job = owner_job(pod.metadata.labels or {})
                if not job:
                    continue
                with self.lock:
                    names = self.running.setdefault(job, set())
                    up = (
                        ev["type"] != "DELETED"
                        and pod.status.phase == "Running"
                        and not pod.metadata.deletion_timestamp
                    )
                    (names.add if up else names.discard)(pod.metadata.name)
                    if len(names) >= 2 and job not in self.all_running:
                        self.all_running[job] = now

    def wait(self, job: str, timeout: float) -> float:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if job in self.all_running:
                    return self.all_running[job]
            time.sleep(0.05)
        raise TimeoutError(f"{job}: its 2 pods were never Running together within {timeout:.0f} s")


def kubectl(*args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(["kubectl", *args], input=stdin, text=True, check=False, capture_output=True)
    if proc.returncode:
        raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


# The kubelet reports a started container at its next PLEG relist, once a second; a loop paced by pods it saw
# Running (and gone) starts each apply at the same phase of that clock, and a path 0.1 s longer then lands on the
# next tick every time: whole seconds of difference that are the loop's, not the integration's. A random wait of up
# to a second before each apply spreads the phase for both kinds alike.
PHASE = random.Random(0)


def apply(ns: str, doc: dict[str, Any]) -> float:
    time.sleep(PHASE.uniform(0, 1))
    t0 = time.monotonic()
    kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(doc))
    return t0


def wait_no_pods(core: Any, ns: str, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while core.list_namespaced_pod(ns).items:
        if time.monotonic() > end:
            raise TimeoutError(f"pods of {ns} still there after {timeout:.0f} s")
        time.sleep(0.5)


def delete_all(core: Any, ns: str) -> None:
    kubectl("delete", "tabularjobs,jobs", "--all", "-n", ns, "--wait=false", "--cascade=background")
    wait_no_pods(core, ns)


def start_run(prefix: str, objects: Callable[[str], list[dict[str, Any]]], port: int, log: str) -> tuple[Any, str, Any]:
    """A fresh namespace NAME (`prefix-xxxxxx`) with the CRD, the run's Kueue objects (`objects(NAME)`: a
    ClusterQueue and ResourceFlavor named NAME among them) and an operator watching it, logging to
    bench/results/LOG. Returns the core API, the namespace and the operator's process."""
    from kubernetes import client, config

    config.load_kube_config()
    core = client.CoreV1Api()
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    install_crd()
    kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects(ns)))
    env = {**os.environ, "TABJOB_TRAINER_IMAGE": TRAINER_IMAGE}
    return core, ns, start_operator(ns, REPO / "bench" / "results" / log, env, port)


def end_run(op: Any, ns: str) -> None:
    """The operator stopped, the namespace and the run's ClusterQueue and ResourceFlavor deleted (not waited for)."""
    op.terminate()
    op.wait(timeout=30)
    subprocess.run(["kubectl", "delete", "namespace", ns, "--wait=false"], capture_output=True)
    subprocess.run(["kubectl", "delete", "clusterqueue,resourceflavor", ns, "--wait=false"], capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20, help="admissions measured per kind")
    ap.add_argument("--preemptions", type=int, default=5, help="preemptions measured per kind")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one job may take to have its pods Running")
    ap.add_argument("--settle", type=float, default=10, help="seconds a low job runs before the high one is applied")
    ap.add_argument(
        "--save", default="kueue_peer", metavar="NAME", help="write bench/results/NAME.json (default: %(default)s)"
    )
    args = ap.parse_args()

    from kubernetes import client

    core, ns, op = start_run("bench-kueue", queues, free_port(), "kueue_peer_operator.log")
    results: dict[str, Any] = {"namespace": ns, "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    try:
        watch = RunningWatch(core, ns)
        watch.start()
        time.sleep(1)

        # The peer's pods copy a real TabularJob pod: the first TabularJob run provides it.
        like: dict[str, Any] = {}

        def tab(name: str, priority: str) -> dict[str, Any]:
            return tabular_job(name, priority)

        def job(name: str, priority: str) -> dict[str, Any]:
            return batch_job(name, priority, like)

        kinds: dict[str, tuple[Callable[[str, str], dict[str, Any]], str]] = {"tabjob": (tab, ""), "job": (job, "job/")}

        # 1. admission: apply -> both pods Running, one job at a time, alternately
        # Run -1 is a warm-up, not measured: the first pods on a node unpack the trainer image (3 GB), which can
        # outlast waitForPodsReady and would time an image pull, not admission.
        lat: dict[str, list[float]] = {"tabjob": [], "job": []}
        for i in range(-1, args.runs):
            for kind, (make, prefix) in kinds.items():
                name = f"adm-{i}" if i >= 0 else "warm-up"
                t0 = apply(ns, make(name, "bench-kueue-low"))
                took = watch.wait(prefix + name, args.timeout) - t0
                if i >= 0:
                    lat[kind].append(took)
                if not like:
                    pods = core.list_namespaced_pod(ns, label_selector=f"tabjob.dev/job-name={name}").items
                    like = client.ApiClient().sanitize_for_serialization(pods[0])
                    copy_plan(core, ns, name)
                delete_all(core, ns)
        for kind, values in lat.items():
            results[f"{kind}_apply_to_running_p50_s"] = round(statistics.median(values), 3)
            results[f"{kind}_apply_to_running_p99_s"] = round(pct(values, 0.99), 3)
        results["apply_to_running_p50_ratio"] = round(
            statistics.median(lat["tabjob"]) / statistics.median(lat["job"]), 2
        )
        results["apply_to_running_p99_ratio"] = round(pct(lat["tabjob"], 0.99) / pct(lat["job"], 0.99), 2)

        # 2. preemption: a low job of the kind Running; a high one applied -> the high one's pods Running
        pre: dict[str, list[float]] = {"tabjob": [], "job": []}
        for i in range(args.preemptions):
            for kind, (make, prefix) in kinds.items():
                apply(ns, make(f"low-{i}", "bench-kueue-low"))
                watch.wait(f"{prefix}low-{i}", args.timeout)
                # Preempted at work, not while starting: a trainer stopped during its imports took 1.4 s to exit.
                time.sleep(args.settle)
                t0 = apply(ns, make(f"high-{i}", "bench-kueue-high"))
                pre[kind].append(watch.wait(f"{prefix}high-{i}", args.timeout) - t0)
                delete_all(core, ns)
        if args.preemptions:
            for kind, values in pre.items():
                results[f"{kind}_preempt_to_running_p50_s"] = round(statistics.median(values), 3)
                results[f"{kind}_preempt_to_running_max_s"] = round(max(values), 3)
            results["preempt_to_running_p50_ratio"] = round(
                statistics.median(pre["tabjob"]) / statistics.median(pre["job"]), 2
            )
        results["samples_s"] = {"admission": lat, "preemption": pre}
    finally:
        end_run(op, ns)
    write(args.save, envelope("kueue_peer", results, vars(args)))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
