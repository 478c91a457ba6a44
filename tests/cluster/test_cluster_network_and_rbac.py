"""Pods reach each other by hostname under a headless Service, and talk to the API server as their
ServiceAccount, limited by its Role."""

from __future__ import annotations

import json

import pytest

from tests.cluster.fixtures import Cluster
from tests.cluster.manifests import pod

pytestmark = pytest.mark.e2e

# Each peer listens on its own pod IP, then connects to the other by its DNS name and prints what it hears.
PEER = """
import os, socket, sys, threading, time
me, other, port = os.environ["POD_IP"], sys.argv[1], 7777
srv = socket.create_server((me, port))

def serve():
    conn, _ = srv.accept()
    conn.sendall(socket.gethostname().encode())
    conn.close()

server = threading.Thread(target=serve)
server.start()
for _ in range(300):
    try:
        with socket.create_connection((other, port), timeout=1) as c:
            print("heard", c.recv(100).decode(), "from", socket.gethostbyname(other), flush=True)
            break
    except OSError:
        time.sleep(0.1)
server.join(30)
"""


def _peer(name: str, other: str) -> dict[str, object]:
    manifest = pod(
        name,
        "",
        hostname=name,
        subdomain="ring",
        env=[{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
    )
    manifest["metadata"]["labels"] = {"app": "ring"}
    manifest["spec"]["containers"][0]["command"] = ["python", "-c", PEER, other]
    return manifest


def test_headless_service_pods_reach_each_other_by_hostname(cluster: Cluster, namespace: str) -> None:
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "ring"},
            "spec": {"clusterIP": "None", "selector": {"app": "ring"}, "ports": [{"port": 7777}]},
        },
        namespace,
    )
    cluster.apply(_peer("a", f"b.ring.{namespace}.svc.cluster.local"), namespace)
    cluster.apply(_peer("b", "a.ring"), namespace)
    for name, other in (("a", "b"), ("b", "a")):
        done = cluster.wait_phase(namespace, name, "Succeeded", "Failed")
        out = cluster.kubectl("logs", "-n", namespace, name).stdout
        assert done["status"]["phase"] == "Succeeded", out
        other_ip = cluster.pod(namespace, other)["status"]["podIP"]
        assert out.strip() == f"heard {other} from {other_ip}"


def test_service_account_token_is_limited_by_its_role(cluster: Cluster, namespace: str) -> None:
    cluster.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}}, namespace)
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        },
        namespace,
    )
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        },
        namespace,
    )
    # The real kubectl inside the pod, configured the in-cluster way: token and CA at the standard path and
    # KUBERNETES_SERVICE_HOST/PORT.
    kubectl = cluster.kubectl_path
    script = (
        f"{kubectl} get pods -o name; echo pods=$?; {kubectl} get secrets 2>&1; echo secrets=$?; "
        f"{kubectl} auth whoami -o json"
    )
    cluster.apply(pod("client", script, serviceAccountName="reader"), namespace)
    cluster.wait_phase(namespace, "client", "Succeeded", "Failed")
    out = cluster.kubectl("logs", "-n", namespace, "client").stdout
    assert "pod/client" in out and "pods=0" in out, out
    assert "secrets=1" in out and "Forbidden" in out, out
    whoami = json.loads(out[out.index("{") :])
    assert whoami["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:reader"
