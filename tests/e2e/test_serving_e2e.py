"""Serving on the test bed: the quickstart job writes its output and its MLServer export (spec.export) to a
PersistentVolumeClaim; a pod of the trainer image serves the export with `mlserver start` behind a Service, ready on
/v2/health/ready; a V2 request from another pod gets exactly what `tabjob predict` writes for the same rows, and
MLServer's metrics answer on the metrics port.

The claim is bound to a hostPath PersistentVolume on one node (the test bed has no storage provisioner): the
directory is on this machine, so the test also runs `tabjob predict` on the very run the pods wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator
from tests.e2e.test_operator_e2e import get, pods, wait_condition

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
NODE = "cpu-node-1"
SERVICE = "quickstart-v2"
ROWS = 40  # breast_cancer rows sent in the V2 request
SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


@pytest.fixture
def claim(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A claim bound to a hostPath volume on NODE, writable by the trainer's user; the host directory."""
    host = tmp_path / "volume"
    host.mkdir()
    host.chmod(0o777)
    pv = f"tabjob-serving-{uuid.uuid4().hex[:6]}"
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": str(host), "type": "Directory"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}]}
                    ]
                }
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "tabjob-output"},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": pv,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(volume))
    cluster.apply(pvc, namespace)
    try:
        yield "tabjob-output", host
    finally:
        cluster.kubectl("delete", "pv", pv, "--wait=false", check=False)


def _serving_objects(export: str) -> list[dict[str, Any]]:
    labels = {"app": "quickstart-serving"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "quickstart-serving", "labels": labels},
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 1000},
            "containers": [
                {
                    "name": "mlserver",
                    "image": "ghcr.io/tabjob/tabjob-trainer:0.1.0-cpu",
                    "imagePullPolicy": "Never",
                    "command": ["mlserver", "start", export],
                    "workingDir": "/tmp",
                    "env": [
                        {"name": "HOME", "value": "/tmp"},
                        {"name": "MLSERVER_HTTP_PORT", "value": "8080"},
                        {"name": "MLSERVER_GRPC_PORT", "value": "8081"},
                        {"name": "MLSERVER_METRICS_PORT", "value": "8082"},
                    ],
                    "ports": [
                        {"name": "http", "containerPort": 8080},
                        {"name": "metrics", "containerPort": 8082},
                    ],
                    "readinessProbe": {
                        "httpGet": {"path": "/v2/health/ready", "port": 8080},
                        "periodSeconds": 3,
                        "failureThreshold": 2,
                    },
                    "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
                    "securityContext": SECURITY,
                    "volumeMounts": [{"name": "output", "mountPath": "/output", "readOnly": True}],
                }
            ],
            "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": "tabjob-output", "readOnly": True}}],
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        # Not "quickstart": the operator's headless Service of the job has that name.
        "metadata": {"name": SERVICE, "labels": labels},
        "spec": {
            "selector": labels,
            "ports": [
                {"name": "http", "port": 8080, "targetPort": "http"},
                {"name": "metrics", "port": 8082, "targetPort": "metrics"},
            ],
        },
    }
    return [pod, service]


CLIENT = """
import json, sys, urllib.request
host = sys.argv[1]
body = open("/request/body.json", "rb").read()
req = urllib.request.Request(f"http://{host}:8080/v2/models/quickstart/infer", data=body,
                             headers={"Content-Type": "application/json"})
answer = json.loads(urllib.request.urlopen(req, timeout=60).read())
metrics = urllib.request.urlopen(f"http://{host}:8082/metrics", timeout=30).read().decode()
print(json.dumps({"answer": answer, "metrics": [l for l in metrics.splitlines() if l.startswith("model_infer")]}))
"""


def _client_pod(body: str, namespace: str) -> list[dict[str, Any]]:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "request"}, "data": {"body.json": body}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "v2-client"},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "client",
                    "image": "ghcr.io/tabjob/tabjob-trainer:0.1.0-cpu",
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", CLIENT, f"{SERVICE}.{namespace}.svc"],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                    "securityContext": SECURITY,
                    "volumeMounts": [{"name": "request", "mountPath": "/request"}],
                }
            ],
            "volumes": [{"name": "request", "configMap": {"name": "request"}}],
        },
    }
    return [config, pod]


def _apply_all(cluster: Cluster, namespace: str, objects: list[dict[str, Any]]) -> None:
    cluster.apply(yaml.safe_dump_all(objects), namespace)


def test_the_quickstart_export_is_served_from_its_volume_to_another_pod(
    cluster: Cluster, operator: Operator, namespace: str, claim: tuple[str, Path], tmp_path: Path
) -> None:
    claim_name, host = claim
    job = yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text())
    job["spec"]["output"]["volume"] = {"persistentVolumeClaim": {"claimName": claim_name}}
    job["spec"]["export"] = {"format": "mlserver"}
    cluster.apply(job, namespace)
    st = wait_condition(cluster, namespace, "quickstart", "Succeeded", timeout=600)
    assert st["exportPath"] == "/output/quickstart/mlserver", st
    assert {p["spec"]["nodeName"] for p in pods(cluster, namespace, "quickstart")} == {NODE}

    _apply_all(cluster, namespace, _serving_objects(st["exportPath"]))
    ready = cluster.kubectl(
        "wait", "-n", namespace, "pod/quickstart-serving", "--for=condition=Ready", "--timeout=300s",
        check=False, timeout=330,
    )  # fmt: skip
    if ready.returncode != 0:
        log = cluster.kubectl("logs", "-n", namespace, "quickstart-serving", check=False).stdout
        raise AssertionError(f"the serving pod never got ready: {ready.stderr}\n{log[-3000:]}")

    # The same rows through `tabjob predict` here, on the run the pods wrote to the volume.
    from sklearn.datasets import load_breast_cancer

    rows = load_breast_cancer(as_frame=True).frame.drop(columns=["target"]).iloc[:ROWS]
    rows.to_csv(tmp_path / "rows.csv", index=False)
    code = "import sys; from tabjob.cli import main; sys.exit(main(sys.argv[1:]))"
    args = ["predict", str(host / "quickstart"), str(tmp_path / "rows.csv"), "-o", str(tmp_path / "p.csv")]
    predicted = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert predicted.returncode == 0, predicted.stderr
    expected = pd.read_csv(tmp_path / "p.csv")

    inputs = [{"name": c, "datatype": "FP64", "shape": [ROWS, 1], "data": rows[c].tolist()} for c in rows.columns]
    _apply_all(cluster, namespace, _client_pod(json.dumps({"inputs": inputs}), namespace))
    cluster.wait_for(
        "the V2 client pod to finish",
        lambda: (
            phase
            if (phase := cluster.pod(namespace, "v2-client")["status"].get("phase")) in ("Succeeded", "Failed")
            else None
        ),
        timeout=240,
    )
    out = cluster.kubectl("logs", "-n", namespace, "v2-client").stdout
    assert cluster.pod(namespace, "v2-client")["status"]["phase"] == "Succeeded", out
    reply = json.loads(out.strip().splitlines()[-1])
    served = pd.DataFrame({o["name"]: o["data"] for o in reply["answer"]["outputs"]})
    pd.testing.assert_frame_equal(served, expected, check_exact=True, check_dtype=False)
    assert any(line.startswith("model_infer_request_success") for line in reply["metrics"]), reply["metrics"]
    assert get(cluster, namespace, "quickstart")["status"]["phase"] == "Succeeded"
