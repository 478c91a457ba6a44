"""pytest fixtures for the local control plane (loaded from tests/conftest.py as a plugin).

`cluster` (session): reuses a running `make cluster`, or starts one (building the binaries the first time, which
takes minutes) and stops it again at the end of the session unless TABJOB_KEEP_CLUSTER=1. It also exports
KUBECONFIG and puts this kubectl and helm first on PATH for the session, so clients under test find the cluster.
`namespace` (function): a fresh namespace per test, enforcing Pod Security `restricted` as a production namespace
would, with its default ServiceAccount ready; deleted afterwards.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from hack.cluster import controlplane, network, nodes
from hack.cluster.kube import Kube
from hack.cluster.network import Net
from hack.cluster.paths import ENV_FILE, KUBECONFIG, NET_FILE, REPO
from hack.cluster.wait import wait_condition

T = TypeVar("T")


@dataclass
class Cluster:
    kube: Kube
    kubeconfig: Path
    kubectl_path: Path
    helm_path: Path

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster; raises with its stderr when `check` and it fails."""
        proc = subprocess.run(
            [str(self.kubectl_path), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc

    def wait_condition(
        self, ref: str, condition: str, namespace: str | None = None, value: str = "True", timeout: float = 60.0
    ) -> dict[str, Any]:
        """Poll until `ref` exists with `condition`=`value` and return it (hack/cluster/wait.py: unlike `kubectl
        wait`, a missing object or status is "not yet"); raises with the object's last status at `timeout`."""
        return wait_condition(
            [str(self.kubectl_path), f"--kubeconfig={self.kubeconfig}"],
            ref,
            condition,
            namespace=namespace,
            value=value,
            timeout=timeout,
        )

    def apply(self, manifest: str | dict[str, Any], namespace: str) -> None:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        self.kubectl("apply", "-n", namespace, "-f", "-", input=text)

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    @property
    def net(self) -> Net:
        net = network.load(NET_FILE)
        if net is None:
            raise AssertionError(f"no cluster network recorded in {NET_FILE}")
        return net

    def require_images(self, *refs: str) -> None:
        """Fail with what to do when a node lacks one of the images (they come from hack/images/build.sh)."""
        from hack.cluster import images

        for spec in nodes.NODES:
            missing = set(refs) - set(images.present(spec.name))
            if missing:
                raise AssertionError(
                    f"{', '.join(sorted(missing))} not on node {spec.name}: run `make images cluster` "
                    "(make cluster imports what hack/images/build.sh built, also into a running cluster)"
                )

    def stop_kubelet(self, node: str) -> None:
        """Stop a node's kubelet (its containerd and pods keep running): to the control plane, a lost node."""
        d = nodes.node_dir(node)
        (d / "kubelet.stopped").touch()
        os.kill(int((d / "kubelet.pid").read_text()), signal.SIGKILL)

    def start_kubelet(self, node: str) -> None:
        (nodes.node_dir(node) / "kubelet.stopped").unlink(missing_ok=True)

    def stop_apiserver(self, sig: int = signal.SIGKILL) -> None:
        """Stop kube-apiserver (etcd keeps the state): every client's requests and watches fail until it is back."""
        controlplane.stop_apiserver(sig)

    def start_apiserver(self) -> None:
        controlplane.start_apiserver()

    def node_ready(self, node: str) -> bool:
        obj = self.kube.get(f"/api/v1/nodes/{node}")
        return any(c["type"] == "Ready" and c["status"] == "True" for c in obj["status"].get("conditions", []))

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float = 60.0) -> T:
        """Poll `probe` until it returns something other than None/False."""
        deadline = time.monotonic() + timeout
        while True:
            result = probe()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.25)

    def wait_phase(self, namespace: str, name: str, *phases: str, timeout: float = 60.0) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            pod = self.kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}", ok_missing=True)
            return pod if pod and pod.get("status", {}).get("phase") in phases else None

        try:
            return self.wait_for(f"pod {namespace}/{name} to be {'/'.join(phases)}", probe, timeout)
        except AssertionError as exc:
            pod = self.kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}", ok_missing=True)
            raise AssertionError(f"{exc}; pod status: {json.dumps((pod or {}).get('status'))}") from None


def _binaries_or_skip() -> None:
    try:
        controlplane.binaries(build=False)
    except controlplane.ClusterError:
        if shutil.which("go") is None:
            pytest.skip(
                "the local control plane is not built and Go is not installed to build it "
                "(hack/cluster/build.sh needs Go >= 1.26 and the Go module proxy)"
            )


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    started = not controlplane.is_up()
    if started:
        _binaries_or_skip()
    # A subprocess, so the components are not children of pytest and outlive nothing but `down`. On a running
    # cluster it only imports the images built since it started.
    subprocess.run([sys.executable, "-m", "hack.cluster.controlplane", "up"], cwd=REPO, check=True)
    bins = controlplane.binaries(build=False)
    saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "PATH")}
    os.environ["KUBECONFIG"] = str(KUBECONFIG)
    os.environ["PATH"] = f"{bins['K8S_BIN']}:{bins['HELM_BIN']}:{os.environ.get('PATH', '')}"
    try:
        yield Cluster(
            Kube.from_kubeconfig(KUBECONFIG), KUBECONFIG, bins["K8S_BIN"] / "kubectl", bins["HELM_BIN"] / "helm"
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if started and os.environ.get("TABJOB_KEEP_CLUSTER") != "1":
            controlplane.down()
        elif ENV_FILE.exists():
            pass  # a cluster someone started with `make cluster` stays up for them


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    slug = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{slug}-{uuid.uuid4().hex[:5]}"
    labels = {"tabjob.dev/test": "e2e", "pod-security.kubernetes.io/enforce": "restricted"}
    cluster.kube.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
    # Pods are refused until the serviceaccount controller has made `default` in the new namespace.
    cluster.wait_for(
        f"default ServiceAccount in {name}",
        lambda: cluster.kube.get(f"/api/v1/namespaces/{name}/serviceaccounts/default", ok_missing=True),
        timeout=30,
    )
    yield name
    cluster.kube.delete(f"/api/v1/namespaces/{name}")
