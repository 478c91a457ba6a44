"""Pod networking as on any cluster: a pod IP per pod from its node's range, cluster DNS for Services and for the
pods of a headless Service, ClusterIPs through kube-proxy, and the host reaching pods (the e2e operator does)."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from hack.cluster.manifests import toolbox_pod
from hack.cluster.nodes import NODES
from tests.cluster.fixtures import Cluster

pytestmark = pytest.mark.e2e


def _service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {"selector": {"app": "grp"},
            **spec}}  # fmt: skip


def _member(name: str, node: str) -> dict[str, Any]:
    pod = toolbox_pod(name, "serve", ":8080", f"hello from {name}", hostname=name, subdomain="grp", nodeName=node)
    pod["metadata"]["labels"] = {"app": "grp"}
    return pod


def _run(cluster: Cluster, ns: str, *args: str) -> str:
    return cluster.kubectl("exec", "-n", ns, "client", "--", "/toolbox", *args).stdout


@pytest.fixture
def group(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    """Two serving pods on two nodes under a headless Service `grp` and a ClusterIP Service `web`, plus an idle
    client pod on the third node."""
    cluster.apply(_service("grp", clusterIP="None", ports=[{"port": 8080}]), namespace)
    cluster.apply(_service("web", ports=[{"port": 80, "targetPort": 8080}]), namespace)
    cluster.apply(_member("a", "gpu-node-1"), namespace)
    cluster.apply(_member("b", "gpu-node-2"), namespace)
    cluster.apply(toolbox_pod("client", "sleep", "600", nodeName="cpu-node-1"), namespace)
    return {name: cluster.wait_phase(namespace, name, "Running") for name in ("a", "b", "client")}


def test_pod_ips_come_from_their_nodes_range(cluster: Cluster, group: dict[str, dict[str, Any]]) -> None:
    index = {n.name: n.index for n in NODES}
    for pod in group.values():
        ip = ipaddress.ip_address(pod["status"]["podIP"])
        assert ip in ipaddress.ip_network(cluster.net.node_pod_cidr(index[pod["spec"]["nodeName"]]))


def test_headless_service_names_resolve_through_cluster_dns(
    cluster: Cluster, namespace: str, group: dict[str, dict[str, Any]]
) -> None:
    a_ip = group["a"]["status"]["podIP"]
    _wait_until_dns_serves(cluster, namespace, "grp", group)
    for name in (f"a.grp.{namespace}.svc.cluster.local", f"a.grp.{namespace}.svc", "a.grp"):
        assert _run(cluster, namespace, "lookup", name).split() == [a_ip], name
    both = sorted(group[p]["status"]["podIP"] for p in ("a", "b"))
    assert sorted(_run(cluster, namespace, "lookup", f"grp.{namespace}.svc.cluster.local").split()) == both
    # The torchrun pattern: a peer on another node reaches pod `a` by its name under the Service.
    assert _run(cluster, namespace, "get", f"a.grp.{namespace}.svc:8080").strip() == "hello from a"


def _ready_endpoint_ips(cluster: Cluster, namespace: str, service: str) -> set[str]:
    selector = f"labelSelector=kubernetes.io/service-name%3D{service}"
    slices = cluster.kube.get(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices?{selector}")["items"]
    return {
        address
        for piece in slices
        for endpoint in piece.get("endpoints") or []
        if (endpoint.get("conditions") or {}).get("ready")
        for address in endpoint["addresses"]
    }


def _wait_for_ready_endpoints(cluster: Cluster, namespace: str, service: str, group: dict[str, Any]) -> set[str]:
    members = {group[p]["status"]["podIP"] for p in ("a", "b")}
    cluster.wait_for(f"EndpointSlice of {service} lists a and b ready",
                     lambda: True if _ready_endpoint_ips(cluster, namespace, service) == members else None)  # fmt: skip
    return members


def _wait_until_dns_serves(cluster: Cluster, namespace: str, service: str, group: dict[str, Any]) -> None:
    """A headless Service's pod names exist in DNS only once the pods are ready in its EndpointSlice and CoreDNS's
    watch has seen that slice; a name asked for earlier is NXDOMAIN (and cached for the Corefile's 5 s)."""
    members = _wait_for_ready_endpoints(cluster, namespace, service, group)
    fqdn = f"{service}.{namespace}.svc.cluster.local"

    def answers() -> bool | None:
        proc = cluster.kubectl("exec", "-n", namespace, "client", "--", "/toolbox", "lookup", fqdn, check=False)
        return True if proc.returncode == 0 and set(proc.stdout.split()) == members else None

    cluster.wait_for(f"cluster DNS answers {fqdn} with a and b", answers, timeout=30)


def _wait_until_kube_proxy_serves(cluster: Cluster, namespace: str, service: str, group: dict[str, Any]) -> None:
    """A Running pod is not yet behind its ClusterIP: the EndpointSlice controller and then kube-proxy's next sync
    must both see it, and until then kube-proxy rejects the connection. Any client on any cluster waits the same."""
    _wait_for_ready_endpoints(cluster, namespace, service, group)

    def answers() -> bool | None:
        proc = cluster.kubectl("exec", "-n", namespace, "client", "--", "/toolbox", "get", f"{service}:80", check=False)
        return True if proc.returncode == 0 else None

    cluster.wait_for(f"kube-proxy forwards {service}'s ClusterIP", answers, timeout=30)


def test_cluster_ips_work_from_pods_and_from_the_host(
    cluster: Cluster, namespace: str, group: dict[str, dict[str, Any]]
) -> None:
    ip = cluster.kube.get(f"/api/v1/namespaces/{namespace}/services/web")["spec"]["clusterIP"]
    assert _run(cluster, namespace, "lookup", "web").split() == [ip]
    _wait_until_kube_proxy_serves(cluster, namespace, "web", group)
    answers = {_run(cluster, namespace, "get", "web:80").strip() for _ in range(12)}
    assert answers <= {"hello from a", "hello from b"} and answers, answers
    assert _run(cluster, namespace, "lookup", "kubernetes.default.svc").split() == [cluster.net.kubernetes_service_ip]
    with socket.create_connection((ip, 80), timeout=5) as conn:
        assert conn.recv(100).decode().startswith("hello from")
    # The API server through the kubernetes Service (kube-proxy to the host end of the cluster's veth).
    assert _run(cluster, namespace, "connect", "kubernetes.default:443").startswith("connected to")


def test_the_host_reaches_pod_ips(group: dict[str, dict[str, Any]]) -> None:
    with socket.create_connection((group["b"]["status"]["podIP"], 8080), timeout=5) as conn:
        assert conn.recv(100).decode().strip() == "hello from b"
