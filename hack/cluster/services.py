"""Cluster services that run beside the nodes in the cluster's network namespace: kube-proxy and CoreDNS.

One kube-proxy (iptables mode) programs the namespace all nodes share, so ClusterIPs work from every pod and from
the host (the host routes the Service range through the veth). CoreDNS answers `cluster.local` from the API
server on the namespace's DNS address; the `kube-dns` Service in kube-system (ClusterIP <services>.10, the
kubelets' clusterDNS) has a hand-made EndpointSlice pointing at it, as a Service for an external backend would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hack.cluster.kube import ApiError, Kube
from hack.cluster.network import Net
from hack.cluster.paths import KUBECONFIG, STATE


def kube_proxy_command(net: Net, k8s_bin: Path) -> list[str]:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(KUBECONFIG)},
        "mode": "iptables",
        "clusterCIDR": net.pod_cidr,
        "hostnameOverride": "cpu-node-1",
        "bindAddress": net.ns_ip,
        "healthzBindAddress": f"{net.ns_ip}:10256",
        "metricsBindAddress": f"{net.ns_ip}:10249",
        # Leave the machine-wide conntrack table size and timeouts alone: they are not the namespace's to set.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "nodePortAddresses": [f"{net.ns_ip}/32"],
        "iptables": {"syncPeriod": "10s", "minSyncPeriod": "0s"},
    }
    path = STATE / "kube-proxy.json"
    path.write_text(json.dumps(config, indent=1) + "\n")
    return [*net.in_netns(), str(k8s_bin / "kube-proxy"), f"--config={path}", "--v=1"]


def coredns_command(net: Net, coredns_bin: Path) -> list[str]:
    corefile = STATE / "Corefile"
    corefile.write_text(
        f""".:53 {{
    bind {net.dns_ip}
    errors
    ready {net.dns_ip}:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {KUBECONFIG} tabjob
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
    loadbalance
}}
"""
    )
    return [*net.in_netns(), str(coredns_bin / "coredns"), "-conf", str(corefile)]


def _apply(kube: Kube, path: str, name: str, body: dict[str, Any]) -> None:
    try:
        kube.create(path, body)
    except ApiError as exc:
        if exc.status != 409:
            raise
        kube.request("PUT", f"{path}/{name}", {**body, "metadata": {**body["metadata"], **_rv(kube, path, name)}})


def _rv(kube: Kube, path: str, name: str) -> dict[str, str]:
    return {"resourceVersion": kube.get(f"{path}/{name}")["metadata"]["resourceVersion"]}


def install_dns_service(kube: Kube, net: Net) -> None:
    """The kube-dns Service and its EndpointSlice (CoreDNS's address in the cluster's namespace)."""
    ports = [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]
    labels = {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}
    _apply(
        kube,
        "/api/v1/namespaces/kube-system/services",
        "kube-dns",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
            "spec": {"clusterIP": net.dns_service_ip, "ports": ports},  # no selector: the endpoint is ours
        },
    )
    _apply(
        kube,
        "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices",
        "kube-dns-coredns",
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "kube-dns-coredns",
                "namespace": "kube-system",
                "labels": {
                    "kubernetes.io/service-name": "kube-dns",
                    "endpointslice.kubernetes.io/managed-by": "test-cluster.tabjob.dev",
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [net.dns_ip], "conditions": {"ready": True}}],
            "ports": ports,
        },
    )
