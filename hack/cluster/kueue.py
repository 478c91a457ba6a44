"""Kueue on the test cluster, installed as a user installs it: Kueue's own Helm chart (from the Go module that
tools/kueue/go.mod pins, copied beside the binary by build.sh) into `kueue-system`, the controller image built from
that module's binary (images.kueue_archive).

What differs from the chart's defaults, and why:
- the image: `localhost/kueue/kueue:<version>` imported into each node (no registry is reachable);
- integrations: `pod` (TabularJobs are Kueue pod groups) and `batch/job` (the benchmark's peer), nothing else, so
  the controller does not wait on CRDs of frameworks this cluster lacks;
- `manageJobsWithoutQueueName: false` (the default, spelled out): a pod without `kueue.x-k8s.io/queue-name` is left
  as it is, so jobs naming no queue run exactly as without Kueue;
- `waitForPodsReady` with a 60 s timeout, so the test of a group that cannot start ends in minutes, and a short
  requeue back-off (10 s, doubling, at most 60 s);
- the controller's requests are zero: each fake node reports the machine's 2 CPUs, and a request would make a
  test's pod that asks for a whole node unschedulable on the node Kueue landed on; its priority is
  system-cluster-critical, as an admission webhook's should be, so the kubelet never evicts it.
Certificates: Kueue's internal cert management (the chart's default) makes the webhook and visibility serving
certificates and injects the CA into the webhook configurations. No cert-manager.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from hack.cluster.images import KUEUE_REPOSITORY
from hack.cluster.kube import ApiError, Kube
from hack.cluster.paths import KUBECONFIG, LOGS

NAMESPACE = "kueue-system"
RELEASE = "kueue"
DEPLOYMENT = "kueue-controller-manager"
POD_READY_TIMEOUT = "60s"

MANAGER_CONFIG = f"""\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 5
    LocalQueue.kueue.x-k8s.io: 1
    ClusterQueue.kueue.x-k8s.io: 1
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 50
  burst: 100
manageJobsWithoutQueueName: false
waitForPodsReady:
  timeout: {POD_READY_TIMEOUT}
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: 10
    backoffMaxSeconds: 60
integrations:
  frameworks:
  - "batch/job"
  - "pod"
"""


def wanted() -> bool:
    """TABJOB_CLUSTER_KUEUE=0: a cluster without Kueue (the clean-up test's second cluster)."""
    return os.environ.get("TABJOB_CLUSTER_KUEUE", "1") != "0"


def version_of(kueue_bin: Path) -> str:
    """The version build.sh keyed the cache entry with: <cache>/kueue-<version>/bin."""
    return kueue_bin.parent.name.removeprefix("kueue-")


def values(version: str) -> dict[str, Any]:
    return {
        "controllerManager": {
            "manager": {
                "image": {"repository": KUEUE_REPOSITORY, "tag": version, "pullPolicy": "IfNotPresent"},
                # The kubelet never evicts a critical pod: under disk pressure (this machine's disk is shared) it
                # evicted Kueue, and its fail-closed pod webhook then refused every pod outside kube-system.
                "priorityClassName": "system-cluster-critical",
                "resources": {"requests": {"cpu": "0", "memory": "0"}, "limits": {"cpu": "1", "memory": "512Mi"}},
            },
            # Probes every 2 s instead of the chart's 5-15 s: `make cluster` waits for Kueue's readiness.
            "readinessProbe": {"initialDelaySeconds": 2},
        },
        "managerConfig": {"controllerManagerConfigYaml": MANAGER_CONFIG},
    }


def install(helm: Path, chart: Path, version: str) -> None:
    """`helm upgrade --install` Kueue's chart (idempotent: a running cluster's `make cluster` changes nothing)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(values(version), f)
    try:
        cmd = [str(helm), "upgrade", "--install", RELEASE, str(chart), "--namespace", NAMESPACE, "--create-namespace"]
        proc = subprocess.run(
            [*cmd, "--values", f.name, "--kubeconfig", str(KUBECONFIG)], capture_output=True, text=True
        )
    finally:
        Path(f.name).unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"helm could not install Kueue {version}: {proc.stderr.strip() or proc.stdout.strip()}")


PROBE_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "kueue-webhook-probe", "labels": {"kueue.x-k8s.io/queue-name": "probe"}},
    "spec": {"containers": [{"name": "c", "image": "localhost/tabjob/toolbox:1"}]},
}


def _webhook_answers(kube: Kube) -> str | None:
    """None once Kueue's pod webhook gates a queued pod (a dry run: nothing is created); else why not yet."""
    try:
        pod = kube.request("POST", "/api/v1/namespaces/default/pods", PROBE_POD, params={"dryRun": "All"})
    except ApiError as exc:
        return str(exc)
    gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
    return None if "kueue.x-k8s.io/admission" in gates else f"the dry-run pod was not gated: {gates}"


def wait_ready(kube: Kube, timeout: float = 180.0) -> None:
    """Until the controller is Available and its pod webhook gates a pod that names a queue."""
    deadline = time.monotonic() + timeout
    why = "not checked yet"
    while time.monotonic() < deadline:
        dep = kube.request("GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{DEPLOYMENT}", ok_missing=True)
        available = any(
            c.get("type") == "Available" and c.get("status") == "True"
            for c in ((dep or {}).get("status") or {}).get("conditions") or []
        )
        problem = _webhook_answers(kube) if available else f"deployment {NAMESPACE}/{DEPLOYMENT} not Available"
        if problem is None:
            return
        why = problem
        time.sleep(1.0)
    raise RuntimeError(
        f"Kueue not ready after {timeout:.0f}s: {why}; kubectl -n {NAMESPACE} logs deploy/{DEPLOYMENT} (logs in {LOGS})"
    )
