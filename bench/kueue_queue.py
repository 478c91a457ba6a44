"""Many TabularJobs queued behind a small GPU quota in Kueue, on a running cluster with Kueue (`make cluster`;
KUBECONFIG set; the trainer image on the nodes). It applies the CRD from crds/ itself.

    .venv/bin/python -m bench.kueue_queue [--jobs 200] [--quota 4] [--window 120] [--save kueue_queue]

Each job is one pod of 1 CPU, 1Gi and 1 `nvidia.com/gpu` (a small GBM on breast_cancer, FallbackToCPU: the test
bed's GPUs are advertised, not real), through one LocalQueue of a ClusterQueue with `--quota` GPUs.

1. waiting: the ClusterQueue is created held (`stopPolicy: Hold`), all jobs are applied, and once every one of them
   has its pods and says it waits (condition Admitted False), the operator's API requests are counted over
   `--window` seconds: what a waiting job costs the API server, per queued job per minute;
2. draining: the hold is lifted and every job runs to its end. Sampled every second, the GPUs of admitted,
   non-terminated pods never exceed the quota; every job must succeed.

The operator runs as a subprocess (`tabjob operator -n NS`), as deployed; its requests are its own Prometheus
counter `tabjob_api_requests_total`. Results go to bench/results/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
from typing import Any

from bench.envelope import envelope, write
from bench.kueue_peer import KUEUE, end_run, kubectl, start_run
from bench.operator_scale import free_port


def queues(ns: str, quota: int) -> list[dict[str, Any]]:
    cq = {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": ns},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "stopPolicy": "Hold",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": ns,
                            "resources": [
                                {"name": "cpu", "nominalQuota": quota},
                                {"name": "memory", "nominalQuota": f"{quota}Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": quota},
                            ],
                        }
                    ],
                }
            ],
        },
    }
    flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": ns}, "spec": {}}
    lq = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": ns},
          "spec": {"clusterQueue": ns}}  # fmt: skip
    return [flavor, cq, lq]


def small_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": name},
        "spec": {
            "data": {"train": "sklearn://breast_cancer", "label": "target"},
            "output": {"path": f"/output/{name}"},
            "resources": {"cpus": 1, "gpus": 1, "memory": "1Gi"},
            "models": {"GBM": [{"hyperparameters": {"num_boost_round": 20}}]},
            "onGpuUnavailable": "FallbackToCPU",
            "scheduling": {"queueName": "q"},
        },
    }


def api_requests(port: int) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return sum(
        int(float(line.split()[-1])) for line in text.splitlines() if line.startswith("tabjob_api_requests_total{")
    )


def jobs_by_state(ns: str) -> dict[str, list[str]]:
    """Job names by phase, and `waiting`: those whose Admitted condition is False."""
    items = json.loads(kubectl("get", "tabularjobs", "-n", ns, "-o", "json"))["items"]
    out: dict[str, list[str]] = {"waiting": []}
    for tj in items:
        status = tj.get("status") or {}
        out.setdefault(status.get("phase") or "None", []).append(tj["metadata"]["name"])
        admitted = [c for c in status.get("conditions") or [] if c["type"] == "Admitted"]
        if admitted and admitted[0]["status"] == "False":
            out["waiting"].append(tj["metadata"]["name"])
    return out


def pod_gpus(pod: Any) -> int:
    return sum(int((c.resources.limits or {}).get("nvidia.com/gpu", 0)) for c in pod.spec.containers)


class QuotaSampler(threading.Thread):
    """Every second: the GPUs of admitted (ungated), non-terminated pods, against the quota."""

    def __init__(self, core: Any, ns: str, quota: int) -> None:
        super().__init__(daemon=True)
        self.core, self.ns, self.quota = core, ns, quota
        self.peak, self.samples, self.over = 0, 0, 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            used = sum(
                pod_gpus(p)
                for p in self.core.list_namespaced_pod(self.ns).items
                if not p.spec.scheduling_gates
                and p.status.phase in ("Pending", "Running")
                and not p.metadata.deletion_timestamp
            )
            self.peak, self.samples = max(self.peak, used), self.samples + 1
            self.over += used > self.quota
            self.stop.wait(1)


def wait_until(what: str, probe: Any, timeout: float) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = probe()
        if got:
            return got
        time.sleep(2)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--quota", type=int, default=4, help="GPUs (and CPUs) of the ClusterQueue")
    ap.add_argument(
        "--window", type=float, default=120, help="seconds the operator's requests are counted, all waiting"
    )
    ap.add_argument("--timeout", type=float, default=3600, help="seconds for all jobs to end once the hold is lifted")
    ap.add_argument("--save", default="kueue_queue", metavar="NAME", help="bench/results/NAME.json")
    args = ap.parse_args()

    port = free_port()
    core, ns, op = start_run("bench-queue", lambda name: queues(name, args.quota), port, "kueue_queue_operator.log")
    results: dict[str, Any] = {"namespace": ns, "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    sampler = QuotaSampler(core, ns, args.quota)
    try:
        names = [f"q-{i:03d}" for i in range(args.jobs)]
        t_apply = time.monotonic()
        for start in range(0, len(names), 50):
            docs = [small_job(n) for n in names[start : start + 50]]
            kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))

        # 1. all waiting: every job has its pod and says so
        def all_waiting() -> bool:
            pods = core.list_namespaced_pod(ns).items
            return len(pods) >= args.jobs and len(jobs_by_state(ns)["waiting"]) == args.jobs

        wait_until(f"all {args.jobs} jobs waiting with their pods", all_waiting, 900)
        results["apply_to_all_waiting_s"] = round(time.monotonic() - t_apply, 1)
        time.sleep(10)  # let the creation burst's follow-ups (status writes, Events) settle
        before, t0 = api_requests(port), time.monotonic()
        time.sleep(args.window)
        requests, minutes = api_requests(port) - before, (time.monotonic() - t0) / 60
        results["waiting_window_s"] = round(minutes * 60, 1)
        results["waiting_api_requests"] = requests
        results["api_requests_per_queued_job_per_minute"] = round(requests / args.jobs / minutes, 3)

        # 2. drain under the quota
        sampler.start()
        t_release = time.monotonic()
        requests_before_drain = api_requests(port)
        kubectl("patch", "clusterqueue", ns, "--type=merge", "-p", '{"spec":{"stopPolicy":"None"}}')

        def all_ended() -> dict[str, list[str]] | None:
            state = jobs_by_state(ns)
            ended = len(state.get("Succeeded", [])) + len(state.get("Failed", []))
            return state if ended >= args.jobs else None

        final = wait_until(f"all {args.jobs} jobs ended", all_ended, args.timeout)
        drain_s = time.monotonic() - t_release
        sampler.stop.set()
        sampler.join(timeout=10)
        results["drain_s"] = round(drain_s, 1)
        results["jobs_per_minute"] = round(args.jobs / drain_s * 60, 2)
        results["succeeded"] = len(final.get("Succeeded", []))
        results["failed"] = sorted(final.get("Failed", []))
        results["gpu_samples"] = sampler.samples
        results["gpu_peak"] = sampler.peak
        results["samples_over_quota"] = sampler.over
        results["drain_api_requests_per_job"] = round((api_requests(port) - requests_before_drain) / args.jobs, 1)
    finally:
        sampler.stop.set()
        end_run(op, ns)
    write(args.save, envelope("kueue_queue", results, vars(args)))
    return 0 if results.get("succeeded") == args.jobs and not results.get("samples_over_quota") else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
