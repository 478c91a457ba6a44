"""The test bed's object store: SeaweedFS's S3 gateway (hack/s3/seaweed.py) beside the control plane.

`make cluster` runs `weed mini` on the host end of the cluster's veth (the address pods already reach the API
server on), and gives it a name inside the cluster as a user's platform would: the Service `s3` in the namespace
`tabjob-s3`, without a selector, and an EndpointSlice pointing at the server. Pods reach it as
http://s3.tabjob-s3.svc; the host, and everything `source .cluster/env` sets up, at http://HOST_IP:8333.

The Secret `s3-credentials` in `tabjob-s3` holds what a pod needs, in the standard AWS variables (keys, region and
the in-cluster endpoint), so a job uses it with `envFrom: [{secretRef: {name: s3-credentials}}]` once it is copied
into the job's namespace (Secrets are never read across namespaces). The bucket `tabjob` exists from the start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hack.cluster.kube import ApiError, Kube
from hack.cluster.network import Net
from hack.s3.seaweed import ACCESS_KEY, REGION, SECRET_KEY, SeaweedS3, weed_argv

NAMESPACE = "tabjob-s3"
SERVICE = "s3"
SECRET = "s3-credentials"
BASE_PORT = 8333
BUCKET = "tabjob"
IN_CLUSTER_ENDPOINT = f"http://{SERVICE}.{NAMESPACE}.svc"


def port(net: Net) -> int:
    return BASE_PORT + net.slot


def host_endpoint(net: Net) -> str:
    return f"http://{net.host_ip}:{port(net)}"


def command(net: Net, state: Path) -> list[str]:
    argv, _ = weed_argv(state / "s3", net.host_ip, port(net))
    return argv


def secret_data(endpoint: str = IN_CLUSTER_ENDPOINT) -> dict[str, str]:
    """The Secret's keys: AWS's own variable names, so `envFrom` hands them to any S3 client unchanged."""
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
    }


def secret(namespace: str, name: str = SECRET) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "tabjob-test-bed"}},
        "type": "Opaque",
        "stringData": secret_data(),
    }


def install(kube: Kube, net: Net, state: Path, pid: int) -> None:
    """Wait for the server, make the default bucket, and publish the Service, EndpointSlice and Secret."""
    server = SeaweedS3(state / "s3", net.host_ip, port(net), pid)
    server.wait_ready()
    server.make_bucket(BUCKET)
    _create(kube, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    ports = [{"name": "http", "port": 80, "targetPort": port(net), "protocol": "TCP"}]
    _create(
        kube,
        f"/api/v1/namespaces/{NAMESPACE}/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
            "spec": {"ports": ports},  # no selector: the endpoint is the server beside the cluster
        },
    )
    _create(
        kube,
        f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices",
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{SERVICE}-seaweedfs",
                "namespace": NAMESPACE,
                "labels": {
                    "kubernetes.io/service-name": SERVICE,
                    "endpointslice.kubernetes.io/managed-by": "test-cluster.tabjob.dev",
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [net.host_ip], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": port(net), "protocol": "TCP"}],
        },
    )
    _create(kube, f"/api/v1/namespaces/{NAMESPACE}/secrets", secret(NAMESPACE))


def _create(kube: Kube, path: str, body: dict[str, Any]) -> None:
    try:
        kube.create(path, body)
    except ApiError as exc:
        if exc.status != 409:
            raise
