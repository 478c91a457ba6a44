"""What the e2e and chaos tests share: a small TabularJob manifest, and reading a job's status, conditions and pods
through kubectl on the local control plane."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hack.cluster import network, s3
from hack.cluster.paths import NET_FILE
from hack.s3.seaweed import SeaweedS3
from tabjob.api import API_VERSION, KIND, LABEL_JOB
from tests.cluster.fixtures import Cluster


def job(name: str, **spec: Any) -> dict[str, Any]:
    """A two-pod CPU job of a few seconds; keyword arguments replace top-level spec fields."""
    base: dict[str, Any] = {
        "data": {"train": "sklearn://breast_cancer", "label": "target", "evalMetric": "roc_auc"},
        "output": {"path": f"/output/{name}"},
        # 2 GiB a pod: the nodes enforce memory limits, and a torch rank with its data needs more than 512 MiB.
        "resources": {"cpus": 2, "cpusPerPod": 1, "memory": "4Gi"},
        "models": {"GBM": [{"hyperparameters": {"num_boost_round": 20}}]},
        "bagging": {"folds": 2},
        "ensemble": {"size": 5},
        "timeLimitSeconds": 300,
    }
    base.update(spec)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": base}


def slow_job(name: str, **spec: Any) -> dict[str, Any]:
    """Long enough (tens of seconds) to be interrupted while it runs."""
    models = {"NN_TORCH": [{"hyperparameters": {"num_epochs": 150}}]}
    return job(name, models=models, **spec)


def get(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    return json.loads(cluster.kubectl("get", "-n", ns, "tabularjob", name, "-o", "json").stdout)


def status(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    return dict(get(cluster, ns, name).get("status") or {})


def condition(st: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in st.get("conditions") or [] if c["type"] == ctype), {})


def wait_condition(cluster: Cluster, ns: str, name: str, ctype: str, timeout: int = 240) -> dict[str, Any]:
    cluster.wait_condition(f"tabularjob/{name}", ctype, namespace=ns, timeout=timeout)
    return status(cluster, ns, name)  # read again: callers assert on fields written with or after the condition


def pods(cluster: Cluster, ns: str, name: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", "pods", "-n", ns, "-l", f"{LABEL_JOB}={name}", "-o", "json").stdout
    return list(json.loads(out)["items"])


def wait_phase(cluster: Cluster, ns: str, name: str, phase: str, timeout: float = 180) -> dict[str, Any]:
    return cluster.wait_for(
        f"{name} to be {phase}",
        lambda: st if (st := status(cluster, ns, name)).get("phase") == phase else None,
        timeout,
    )


def s3_server() -> SeaweedS3:
    """The test bed's S3 server (`make cluster` starts it beside the cluster), as the host reaches it."""
    net = network.load(NET_FILE)
    assert net is not None, "make cluster starts the S3 server beside the cluster"
    host, port = s3.host_endpoint(net).removeprefix("http://").split(":")
    server = SeaweedS3(Path("/nonexistent"), host, int(port), pid=0)
    server.wait_ready(timeout=30)
    return server
