"""Serving on the test bed: the quickstart job writes its output and its MLServer export (spec.export) to a
PersistentVolumeClaim; `tabjob export --format kserve --pod-monitor` turns the run into a ServingRuntime, an
InferenceService and a PodMonitor. KServe is not installed, so the test makes what KServe's RawDeployment mode would:
a pod of the runtime's container with the predictor's labels and the export's claim mounted at /mnt/models, and a
Service on its first port. A V2 request from another pod gets exactly what `tabjob predict` writes for the same rows.

Then Prometheus' side: the PodMonitor is created against prometheus-operator's own CRD (from the Go module
hack/cluster/tools/prometheus-operator pins; no operator runs), and its scrape targets are found as Prometheus would
find them, from the object read back from the API server: the pods its selector matches in the namespaces it names,
the container port its endpoint names, its path. Another pod scrapes that target, and MLServer's counters count the
requests the test made.

The claim is bound to a hostPath PersistentVolume on one node (the test bed has no storage provisioner): the
directory is on this machine, so the test also runs `tabjob predict` on the very run the pods wrote.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from hack.cluster import controlplane
from hack.cluster.manifests import host_volume
from hack.cluster.wait import ConditionTimeout
from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import TRAINER_IMAGE, Operator
from tests.e2e.jobs import get, pods, wait_condition

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
NODE = "cpu-node-1"
SERVICE = "quickstart-predictor"  # KServe's name for an InferenceService's predictor Service
ROWS = 40  # breast_cancer rows sent in the V2 request
EXTRA = 2  # more requests after the first, so the success counter must count them all
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
    volume, pvc = host_volume(pv, str(host), namespace, "tabjob-output", node=NODE)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(volume))
    cluster.apply(pvc, namespace)
    try:
        yield "tabjob-output", host
    finally:
        cluster.kubectl("delete", "pv", pv, "--wait=false", check=False)


MONITOR_CRD = "podmonitors.monitoring.coreos.com"


@pytest.fixture
def pod_monitor_crd(cluster: Cluster) -> Iterator[None]:
    """prometheus-operator's PodMonitor CRD, for this test only (the chart's checks expect a cluster without it)."""
    existed = cluster.kubectl("get", "crd", MONITOR_CRD, check=False).returncode == 0
    crds = Path(controlplane.binaries(build=False)["PROMOP_CRDS"])
    cluster.kubectl("apply", "--server-side", "-f", str(crds / "monitoring.coreos.com_podmonitors.yaml"))
    cluster.wait_condition(f"crd/{MONITOR_CRD}", "Established")
    try:
        yield
    finally:
        if not existed:
            cluster.kubectl("delete", "crd", MONITOR_CRD, "--wait=false", check=False)


def _predictor_objects(runtime: dict[str, Any], isvc: dict[str, Any]) -> list[dict[str, Any]]:
    """What KServe's RawDeployment mode makes of the two manifests, as far as this test needs: a pod running the
    runtime's container as written, labelled as the predictor says, the model's claim mounted read-only at /mnt/models
    (where KServe puts a pvc:// model), and a Service on the container's first port."""
    (container,) = runtime["spec"]["containers"]
    claim, _, inside = isvc["spec"]["predictor"]["model"]["storageUri"].removeprefix("pvc://").partition("/")
    labels = isvc["spec"]["predictor"]["labels"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{isvc['metadata']['name']}-predictor", "labels": labels},
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {"fsGroup": 1000},
            "containers": [
                {
                    **container,
                    "imagePullPolicy": "Never",
                    # The test bed's nodes report 2 CPUs each; the runtime asks for a whole one.
                    "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
                    "volumeMounts": [
                        {"name": "model", "mountPath": "/mnt/models", "subPath": inside, "readOnly": True}
                    ],
                }
            ],
            "volumes": [{"name": "model", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}],
        },
    }
    first = container["ports"][0]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": first["name"], "port": 80, "targetPort": first["name"]}]},
    }
    return [pod, service]


def _label_selector(selector: dict[str, Any]) -> str:
    """A LabelSelector object as the API's labelSelector parameter."""
    terms = [f"{k}={v}" for k, v in selector.get("matchLabels", {}).items()]
    for e in selector.get("matchExpressions", []):
        values = ",".join(e.get("values", []))
        term = {"Exists": e["key"], "DoesNotExist": f"!{e['key']}", "In": f"{e['key']} in ({values})"}
        terms.append(term.get(e["operator"], f"{e['key']} notin ({values})"))
    return ",".join(terms)


def scrape_targets(cluster: Cluster, monitor: dict[str, Any]) -> list[str]:
    """The URLs Prometheus scrapes for a PodMonitor: every running pod its selector matches in the namespaces it
    selects (its own when it names none), at the container port each endpoint names, on the endpoint's path."""
    spec = monitor["spec"]
    names = spec.get("namespaceSelector", {}).get("matchNames") or [monitor["metadata"]["namespace"]]
    selector = urllib.parse.quote(_label_selector(spec["selector"]))
    urls = []
    for ns in names:
        for pod in cluster.kube.get(f"/api/v1/namespaces/{ns}/pods?labelSelector={selector}")["items"]:
            if pod["status"].get("phase") != "Running":
                continue
            ports = {p.get("name"): p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
            for endpoint in spec["podMetricsEndpoints"]:
                if endpoint["port"] in ports:
                    path = endpoint.get("path", "/metrics")
                    urls.append(f"http://{pod['status']['podIP']}:{ports[endpoint['port']]}{path}")
    return urls


CLIENT = """
import json, sys, urllib.error, urllib.request
service, target, extra = sys.argv[1], sys.argv[2], int(sys.argv[3])
url = f"http://{service}/v2/models/quickstart/infer"
body = json.loads(open("/request/body.json").read())
def infer(payload):
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=60).read())
answer = infer(body)
for _ in range(extra):
    infer(body)
try:  # a feature column missing: the model refuses it (400), which MLServer counts as a failure
    infer({"inputs": body["inputs"][1:]})
    refused = None
except urllib.error.HTTPError as err:
    refused = err.code
metrics = urllib.request.urlopen(target, timeout=30).read().decode()
print(json.dumps({"answer": answer, "refused": refused, "metrics": metrics.splitlines()}))
"""


def _client_pod(body: str, namespace: str, target: str, extra: int) -> list[dict[str, Any]]:
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
                    "image": TRAINER_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", CLIENT, f"{SERVICE}.{namespace}.svc", target, str(extra)],
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


def _tabjob(*args: str) -> None:
    """The CLI in a subprocess, as a user runs it (and so the test process never loads the models)."""
    code = "import sys; from tabjob.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"tabjob {' '.join(args)}: {proc.stderr}"


def _counters(lines: list[str], model: str) -> dict[str, float]:
    """MLServer's model_infer_request_* counters of one model, by name, from a Prometheus text exposition."""
    found = {}
    for line in lines:
        m = re.match(r"^(model_infer_request_\w+)_total\{([^}]*)\} (\S+)$", line)
        if m and f'model="{model}"' in m.group(2).split(","):
            found[m.group(1)] = float(m.group(3))
    return found


def test_the_quickstart_export_is_served_and_scraped_through_its_pod_monitor(
    cluster: Cluster, operator: Operator, namespace: str, claim: tuple[str, Path], pod_monitor_crd: None, tmp_path: Path
) -> None:
    claim_name, host = claim
    job = yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text())
    job["spec"]["output"]["volume"] = {"persistentVolumeClaim": {"claimName": claim_name}}
    job["spec"]["export"] = {"format": "mlserver"}
    cluster.apply(job, namespace)
    st = wait_condition(cluster, namespace, "quickstart", "Succeeded", timeout=600)
    assert st["exportPath"] == "/output/quickstart/mlserver", st
    assert {p["spec"]["nodeName"] for p in pods(cluster, namespace, "quickstart")} == {NODE}

    # The manifests a user would apply, from the run the pods wrote.
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    out = tmp_path / "kserve"
    _tabjob(
        "export", str(host / "quickstart"), "--format", "kserve", "--output", str(out),
        "--job", str(tmp_path / "job.yaml"), "--image", TRAINER_IMAGE, "--namespace", namespace, "--pod-monitor",
    )  # fmt: skip
    docs = {p.stem: yaml.safe_load(p.read_text()) for p in out.iterdir()}
    runtime, isvc = docs["servingruntime"], docs["inferenceservice"]
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == f"pvc://{claim_name}/quickstart/mlserver"
    # Strict: the API server refuses a field prometheus-operator's schema does not have, rather than dropping it.
    cluster.kubectl("apply", "--validate=strict", "-n", namespace, "-f", str(out / "podmonitor.yaml"))
    monitor = cluster.kube.get(f"/apis/monitoring.coreos.com/v1/namespaces/{namespace}/podmonitors/quickstart")
    assert monitor["spec"] == docs["podmonitor"]["spec"]  # nothing pruned or defaulted away

    _apply_all(cluster, namespace, _predictor_objects(runtime, isvc))
    try:
        cluster.wait_condition("pod/quickstart-predictor", "Ready", namespace=namespace, timeout=300)
    except ConditionTimeout as exc:
        log = cluster.kubectl("logs", "-n", namespace, "quickstart-predictor", check=False).stdout
        raise AssertionError(f"the serving pod never got ready: {exc}\n{log[-3000:]}") from None
    (target,) = scrape_targets(cluster, monitor)  # exactly the one predictor pod, on its metrics port
    pod_ip = cluster.pod(namespace, "quickstart-predictor")["status"]["podIP"]
    assert target == f"http://{pod_ip}:8082/metrics", target

    # The same rows through `tabjob predict` here, on the run the pods wrote to the volume.
    from sklearn.datasets import load_breast_cancer

    rows = load_breast_cancer(as_frame=True).frame.drop(columns=["target"]).iloc[:ROWS]
    rows.to_csv(tmp_path / "rows.csv", index=False)
    _tabjob("predict", str(host / "quickstart"), str(tmp_path / "rows.csv"), "-o", str(tmp_path / "p.csv"))
    expected = pd.read_csv(tmp_path / "p.csv")

    inputs = [{"name": c, "datatype": "FP64", "shape": [ROWS, 1], "data": rows[c].tolist()} for c in rows.columns]
    _apply_all(cluster, namespace, _client_pod(json.dumps({"inputs": inputs}), namespace, target, EXTRA))
    cluster.wait_for(
        "the V2 client pod to finish",
        lambda: (
            phase
            if (phase := cluster.pod(namespace, "v2-client")["status"].get("phase")) in ("Succeeded", "Failed")
            else None
        ),
        timeout=240,
    )
    log = cluster.kubectl("logs", "-n", namespace, "v2-client").stdout
    assert cluster.pod(namespace, "v2-client")["status"]["phase"] == "Succeeded", log
    reply = json.loads(log.strip().splitlines()[-1])
    served = pd.DataFrame({o["name"]: o["data"] for o in reply["answer"]["outputs"]})
    pd.testing.assert_frame_equal(served, expected, check_exact=True, check_dtype=False)
    assert reply["refused"] == 400, reply["refused"]
    # Every request the client made, and nothing else, as Prometheus would read it from the PodMonitor's target.
    counters = _counters(reply["metrics"], "quickstart")
    assert counters == {"model_infer_request_success": 1 + EXTRA, "model_infer_request_failure": 1}, [
        line for line in reply["metrics"] if line.startswith("model_infer")
    ]
    assert get(cluster, namespace, "quickstart")["status"]["phase"] == "Succeeded"
