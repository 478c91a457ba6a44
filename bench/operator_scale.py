"""Operator benchmarks on a running cluster (`make cluster`; KUBECONFIG set; the CRD installed), side by side
with the same control plane's Job controller as the peer.

    .venv/bin/python -m bench.operator_scale [--latency-jobs 50] [--burst-jobs 500] [--total-jobs 1000]
                                             [--more-jobs 1000]

1. latency: `kubectl apply` of one 2-pod job at a time -> all its pods exist (p50/p99 over --latency-jobs), for a
   TabularJob and for an Indexed Job of the same pod count, alternately, timed by the same pod watch;
2. burst: --burst-jobs one-pod jobs created at once (16 parallel clients) -> every job has its pod: objects/s, for
   TabularJobs and for Indexed Jobs;
3. memory: the operator's resident set once --total-jobs TabularJobs exist and are reconciled, and its growth per
   job over --more-jobs more.
Pods are pinned to a node label no node has, so they stay Pending: the figures are the controllers', not the
trainer's. The operator runs as a subprocess (`tabjob operator`), exactly as deployed. Ratios are tabjob / Job.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.envelope import envelope, write
from hack.cluster.wait import ConditionTimeout, wait_condition
from tests.e2e.children import spawn

REPO = Path(__file__).resolve().parents[1]


def manifest(name: str, pods: int) -> dict[str, Any]:
    return {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": name},
        "spec": {
            "data": {"train": "sklearn://breast_cancer", "label": "target"},
            "output": {"path": f"/output/{name}"},
            "resources": {"cpus": pods, "cpusPerPod": 1, "memory": f"{pods}Gi"},
            "models": {"GBM": [{}]},
            "bagging": {"folds": max(2, pods)},
            "scheduling": {"nodeSelector": {"tabjob.dev/bench": "no-such-node"}},
        },
    }


def indexed_job(name: str, pods: int) -> dict[str, Any]:
    """The Job controller's peer of `manifest(name, pods)`: the same pod count, the same unschedulable pods."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"tabjob.dev/bench": "no-such-node"},
                    "containers": [{"name": "c", "image": "bench.invalid/none:0", "command": ["true"]}],
                }
            },
        },
    }


def owner_job(labels: dict[str, str]) -> str | None:
    """The job a pod belongs to: a TabularJob's label, or the Job controller's (prefixed so names never clash)."""
    if labels.get("tabjob.dev/job-name"):
        return labels["tabjob.dev/job-name"]
    job = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
    return f"job/{job}" if job else None


class PodWatch(threading.Thread):
    """Records when each job's pods were first seen (one watch on the namespace, as a client would)."""

    def __init__(self, core: Any, ns: str) -> None:
        super().__init__(daemon=True)
        self.core, self.ns = core, ns
        self.seen: dict[str, set[str]] = {}
        self.complete: dict[str, float] = {}
        self.want: dict[str, int] = {}
        self.lock = threading.Lock()

    def run(self) -> None:
        from kubernetes import watch

        while True:
            w = watch.Watch()
            for ev in w.stream(self.core.list_namespaced_pod, self.ns, timeout_seconds=300):
                pod = ev["object"]
                job = owner_job(pod.metadata.labels or {})
                if not job or ev["type"] != "ADDED":
                    continue
                now = time.monotonic()
                with self.lock:
                    names = self.seen.setdefault(job, set())
                    names.add(pod.metadata.name)
                    if len(names) >= self.want.get(job, 1 << 30) and job not in self.complete:
                        self.complete[job] = now

    def expect(self, job: str, pods: int) -> None:
        with self.lock:
            self.want[job] = pods
            if len(self.seen.get(job, ())) >= pods:
                self.complete.setdefault(job, time.monotonic())

    def wait(self, jobs: list[str], timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if all(j in self.complete for j in jobs):
                    return
            time.sleep(0.02)
        missing = [j for j in jobs if j not in self.complete]
        raise TimeoutError(f"{len(missing)} job(s) never got their pods, e.g. {missing[:3]}")


def install_crd() -> None:
    """The TabularJob CRD from crds/, as `make cluster` leaves a cluster without it."""
    args = ["apply", "--server-side", "-f", str(REPO / "crds")]
    done = subprocess.run(["kubectl", *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    try:
        wait_condition(["kubectl"], "crd/tabularjobs.tabjob.dev", "Established", timeout=60)
    except ConditionTimeout as exc:
        raise SystemExit(str(exc)) from None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_operator(ns: str, log: Path, env: dict[str, str], metrics_port: int) -> subprocess.Popen[bytes]:
    """`tabjob operator -n NS` as deployed, started as the e2e fixtures start it (it gets SIGTERM if this process
    dies, so no operator outlives a bench), once its /healthz answers: a bench against an operator that never came
    up would time nothing but its absence."""
    health = free_port()
    log.unlink(missing_ok=True)
    op = spawn(
        [str(REPO / ".venv/bin/tabjob"), "operator", "-n", ns, "--metrics-port", str(metrics_port), "--health-port",
         str(health)],
        log=log, env=env, cwd=REPO,
    )  # fmt: skip
    up_by = time.monotonic() + 300
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=1).close()
            return op
        except OSError:
            if time.monotonic() > up_by or op.poll() is not None:
                op.terminate()
                raise SystemExit(f"the operator did not answer /healthz within 300 s; see {log}") from None
            time.sleep(0.2)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-jobs", type=int, default=50)
    ap.add_argument("--burst-jobs", type=int, default=500)
    ap.add_argument("--total-jobs", type=int, default=1000)
    ap.add_argument("--more-jobs", type=int, default=1000, help="jobs added after --total-jobs for RSS growth")
    ap.add_argument("--step", type=int, default=1000, help="record the resident set after every STEP more jobs")
    ap.add_argument("--keep", action="store_true", help="leave the namespace (default: delete it)")
    ap.add_argument("--settle", type=float, default=10.0, help="seconds after each fill before the RSS is read")
    ap.add_argument(
        "--operator-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in the operator's environment (repeatable), e.g. what the operator image's ENV sets",
    )
    ap.add_argument(
        "--save", default="operator_scale", metavar="NAME", help="write bench/results/NAME.json (default: %(default)s)"
    )
    args = ap.parse_args()

    from kubernetes import client, config

    config.load_kube_config()
    cfg = client.Configuration.get_default_copy()
    cfg.connection_pool_maxsize = 32
    api = client.ApiClient(cfg)
    core, custom, batch = client.CoreV1Api(api), client.CustomObjectsApi(api), client.BatchV1Api(api)
    install_crd()
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    port = free_port()
    env = {**os.environ, **dict(kv.split("=", 1) for kv in args.operator_env)}
    log = REPO / "bench" / "results" / "operator.log"
    op = start_operator(ns, log, env, port)
    results: dict[str, Any] = {"namespace": ns, "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    try:
        watcher = PodWatch(core, ns)
        watcher.start()
        time.sleep(1)
        results["rss_idle_mib"] = round(rss_mib(op.pid), 1)

        # 1. latency, one kubectl apply at a time: a TabularJob, then an Indexed Job of the same pod count
        lat: dict[str, list[float]] = {"tabjob": [], "job": []}
        for i in range(args.latency_jobs):
            for kind, doc, key in (
                ("tabjob", manifest(f"lat-{i}", 2), f"lat-{i}"),
                ("job", indexed_job(f"lat-{i}", 2), f"job/lat-{i}"),
            ):
                watcher.expect(key, 2)
                t0 = time.monotonic()
                subprocess.run(["kubectl", "apply", "-n", ns, "-f", "-"], input=json.dumps(doc),
                               text=True, check=True, capture_output=True)  # fmt: skip
                watcher.wait([key], 60)
                lat[kind].append(watcher.complete[key] - t0)
        for kind, values in lat.items():
            if not values:  # --latency-jobs 0: a memory-only run
                continue
            results[f"{kind}_apply_to_pods_p50_s"] = round(statistics.median(values), 3)
            results[f"{kind}_apply_to_pods_p99_s"] = round(pct(values, 0.99), 3)
        if args.latency_jobs:
            results["apply_to_pods_p50_ratio"] = round(
                statistics.median(lat["tabjob"]) / statistics.median(lat["job"]), 2
            )

        # 2. burst: one-pod TabularJobs, then as many one-pod Indexed Jobs, created the same way
        def create(n: str) -> None:
            custom.create_namespaced_custom_object("tabjob.dev", "v1alpha1", ns, "tabularjobs", manifest(n, 1))

        def create_job(n: str) -> None:
            body: Any = indexed_job(n, 1)  # the client sends a dict body as it is; its stubs only name V1Job
            batch.create_namespaced_job(ns, body)

        for kind, make, prefix in (("tabjob", create, "burst-"), ("job", create_job, "job/burst-")):
            if not args.burst_jobs:
                break
            names = [f"burst-{i}" for i in range(args.burst_jobs)]
            keys = [prefix + str(i) for i in range(args.burst_jobs)]
            for k in keys:
                watcher.expect(k, 1)
            t0, cpu0 = time.monotonic(), cpu_seconds(op.pid)
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(make, names))
            applied = time.monotonic() - t0
            watcher.wait(keys, 900)
            took = max(watcher.complete[k] for k in keys) - t0
            if kind == "tabjob":  # the operator's own CPU per job: what the burst costs it, load aside
                results["tabjob_burst_operator_cpu_ms_per_job"] = round(
                    (cpu_seconds(op.pid) - cpu0) * 1000 / args.burst_jobs, 1
                )
            results[f"{kind}_burst_apply_seconds"] = round(applied, 2)
            results[f"{kind}_burst_all_pods_seconds"] = round(took, 2)
            results[f"{kind}_burst_objects_per_second"] = round(args.burst_jobs / took, 1)
        results["burst_jobs"] = args.burst_jobs
        if args.burst_jobs:
            results["burst_ratio"] = round(
                results["tabjob_burst_objects_per_second"] / results["job_burst_objects_per_second"], 2
            )

        # 3. memory with --total-jobs TabularJobs, then its growth over --more-jobs more
        def fill(names: list[str]) -> None:
            for n in names:
                watcher.expect(n, 1)
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(create, names))
            watcher.wait(names, 900)
            time.sleep(args.settle)  # let status patches and events settle, and kopf's idle workers exit

        have = args.latency_jobs + args.burst_jobs  # TabularJobs so far (the Jobs are not the operator's)
        fill([f"fill-{i}" for i in range(max(0, args.total_jobs - have))])
        results["jobs"] = max(have, args.total_jobs)
        results["rss_mib"] = round(rss_mib(op.pid), 1)
        if args.more_jobs:
            # in steps, so the curve shows whether growth is per job or a one-off (a cache's table resizing)
            results["rss_by_jobs"] = [[results["jobs"], results["rss_mib"]]]
            for start in range(0, args.more_jobs, args.step):
                fill([f"more-{i}" for i in range(start, min(args.more_jobs, start + args.step))])
                results["rss_by_jobs"].append([results["jobs"] + min(args.more_jobs, start + args.step),
                                               round(rss_mib(op.pid), 1)])  # fmt: skip
            grown = rss_mib(op.pid) - results["rss_mib"]
            results["jobs_after_more"] = results["jobs"] + args.more_jobs
            results["rss_after_more_mib"] = round(results["rss_mib"] + grown, 1)
            results["rss_growth_kib_per_job"] = round(grown * 1024 / args.more_jobs, 1)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        by_call = {
            line.split("{", 1)[1].split("}", 1)[0]: int(float(line.split()[-1]))
            for line in metrics.splitlines()
            if line.startswith("tabjob_api_requests_total{")
        }
        results["api_requests"] = sum(by_call.values())
        results["api_requests_by_call"] = by_call  # code="200",verb="create" -> count: where the requests go
    finally:
        op.terminate()
        op.wait(timeout=30)
        if not args.keep:
            subprocess.run(["kubectl", "delete", "namespace", ns, "--wait=false"], capture_output=True)
    write(args.save, envelope("operator_scale", results, vars(args)))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
