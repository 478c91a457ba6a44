"""The chart installed for real on the local cluster (tests/cluster): `helm install --wait` brings the operator
pod up from its image on a real kubelet, under the chart's ServiceAccount and RBAC (a missing permission fails
here), `helm test` reaches it, the quickstart TabularJob reaches Succeeded, `helm upgrade` with changed values
rolls the operator, and `helm uninstall` removes what Helm owns while TabularJobs and CRDs stay (Helm never deletes
crds/; charts/tabjob/README.md).

The operator watches only the test's job namespace (watchNamespaces), so the namespaced Roles are what is exercised
and no other test's TabularJobs are touched. Both namespaces enforce Pod Security `restricted`. The trainer pods run
the CPU trainer image (`trainer.image.tag=0.1.0-cpu`), which `make images` built and `make cluster` put on the nodes.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from hack.chart_tools import CHART, REPO

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(1200)]
QUICKSTART = REPO / "examples" / "quickstart.yaml"


class Release:
    def __init__(self, cluster: Any, namespace: str, jobs: str) -> None:
        self.cluster, self.ns, self.jobs, self.name = cluster, namespace, jobs, "tj"
        self.values = ["--set", f"watchNamespaces={{{jobs}}}", "--set", "trainer.image.tag=0.1.0-cpu"]

    def helm(self, *args: str, timeout: float = 300) -> str:
        proc = subprocess.run(
            [str(self.cluster.helm_path), f"--kubeconfig={self.cluster.kubeconfig}", *args, "-n", self.ns],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, f"helm {' '.join(args)}: {proc.stdout}\n{proc.stderr}\n{self.operator_logs()}"
        return proc.stdout

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.cluster.kubectl(*args, "-o", "json").stdout)

    def operator_pods(self) -> list[dict[str, Any]]:
        return self.kubectl_json("get", "pods", "-n", self.ns, "-l", "app.kubernetes.io/component=operator")["items"]

    def operator_logs(self) -> str:
        proc = self.cluster.kubectl(
            "logs", "-n", self.ns, "-l", "app.kubernetes.io/component=operator", "--tail=40", check=False
        )
        return proc.stdout + proc.stderr

    def job(self) -> dict[str, Any]:
        return self.kubectl_json("get", "tabularjob", "quickstart", "-n", self.jobs)


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


@pytest.fixture
def release(cluster: Any) -> Iterator[Release]:
    cluster.require_images("ghcr.io/tabjob/tabjob-operator:0.1.0", "ghcr.io/tabjob/tabjob-trainer:0.1.0-cpu")
    suffix = uuid.uuid4().hex[:5]
    ns, jobs = f"tabjob-system-{suffix}", f"tabjob-jobs-{suffix}"
    for name in (ns, jobs):
        cluster.kubectl("create", "namespace", name)
        # The restricted Pod Security level, enforced: the chart's pods and the trainer pods must meet it.
        cluster.kubectl("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
    rel = Release(cluster, ns, jobs)
    yield rel
    subprocess.run(
        [
            str(cluster.helm_path),
            f"--kubeconfig={cluster.kubeconfig}",
            "uninstall",
            rel.name,
            "-n",
            ns,
            "--ignore-not-found",
        ],
        capture_output=True,
    )
    cluster.kubectl("delete", "tabularjob", "--all", "-n", jobs, "--wait=false", check=False)
    cluster.kubectl("delete", "namespace", ns, jobs, "--wait=false", check=False)


def test_install_run_upgrade_uninstall(cluster: Any, release: Release) -> None:
    # Helm 4 applies crds/ server-side; --force-conflicts takes over fields another manager (an earlier
    # `kubectl apply` of the same CRD by another test) holds, as docs/upgrading-crds.md describes.
    out = release.helm(
        "install", release.name, str(CHART), *release.values, "--wait", "--timeout", "180s", "--force-conflicts"
    )
    assert "STATUS: deployed" in out or "Install complete" in out, out
    # The chart's default: two replicas, one leader on the Lease.
    pods = release.operator_pods()
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    assert all(_ready(p) and p["spec"]["serviceAccountName"] == "tj-tabjob" for p in pods)

    assert "Phase:          Succeeded" in release.helm("test", release.name, "--timeout", "120s")

    # What the API server's authorizer says the operator's ServiceAccount may do (impersonated).
    sa = f"system:serviceaccount:{release.ns}:tj-tabjob"
    for verb, what, ns, allowed in [
        ("create", "pods", release.jobs, "yes"),
        ("patch", "tabularjobs.tabjob.dev/status", release.jobs, "yes"),
        ("get", "secrets", release.jobs, "no"),
        ("create", "pods/exec", release.jobs, "no"),
        ("update", "tabularjobs.tabjob.dev", release.jobs, "no"),
        ("list", "pods", "default", "no"),
        ("list", "pods", release.ns, "no"),
    ]:
        resource, _, sub = what.partition("/")
        args = [verb, resource, "-n", ns, f"--as={sa}"] + ([f"--subresource={sub}"] if sub else [])
        proc = cluster.kubectl("auth", "can-i", *args, check=False)
        assert proc.stdout.strip() == allowed, f"{sa} can-i {verb} {what} -n {ns}: {proc.stdout}"

    # The README's job, applied as a user would; a second server-side apply changes nothing.
    for _ in range(2):
        cluster.kubectl("apply", "--server-side", "-n", release.jobs, "-f", str(QUICKSTART))
    assert release.job()["metadata"]["generation"] == 1
    deadline = time.monotonic() + 900
    while (phase := (release.job().get("status") or {}).get("phase")) not in ("Succeeded", "Failed"):
        assert time.monotonic() < deadline, f"quickstart still {phase}:\n{release.operator_logs()}"
        time.sleep(3)
    status = release.job()["status"]
    assert phase == "Succeeded", json.dumps(status, indent=1) + release.operator_logs()
    assert status.get("bestModel") and status.get("models"), json.dumps(status, indent=1)
    # The documented GitOps health of the real object: kstatus Ready for Flux, the Lua check for Argo CD. Read by
    # kubectl itself, as the docs promise, and checked once (--timeout=0s): the phase above is written with the
    # conditions, so there is nothing left to wait for, and nothing for a fresh object's race to hit.
    cluster.kubectl("wait", "-n", release.jobs, "tabularjob/quickstart", "--for=condition=Ready", "--timeout=0s")
    from tests.unit.test_argocd_health import health

    assert health(release.job())[0] == "Healthy"

    # Changed values roll the operator: a new pod from a new ReplicaSet, Ready, and answering.
    old = {p["metadata"]["name"] for p in pods}
    release.helm(
        "upgrade",
        release.name,
        str(CHART),
        *release.values,
        "--set",
        "operator.progressInterval=5",
        "--set",
        "podAnnotations.tabjob\\.dev/rolled=yes",
        "--wait",
        "--timeout",
        "180s",
    )
    cluster.wait_for(
        "the old operator pod to go",
        lambda: len(now := release.operator_pods()) == 2 and not old & {p["metadata"]["name"] for p in now},
        timeout=120,
    )
    news = release.operator_pods()
    for new in news:
        assert _ready(new) and new["metadata"]["annotations"]["tabjob.dev/rolled"] == "yes"
        env = {e["name"]: e.get("value") for e in new["spec"]["containers"][0]["env"]}
        assert env["TABJOB_PROGRESS_INTERVAL"] == "5"
    assert "Phase:          Succeeded" in release.helm("test", release.name, "--timeout", "120s")

    # The Lease handed over: the old pod released it on SIGTERM and the new one holds it.
    def holder() -> str:
        lease = release.kubectl_json("get", "lease", "tj-tabjob", "-n", release.ns)
        return str(lease["spec"].get("holderIdentity") or "")

    cluster.wait_for(
        "the new operator pod to hold the Lease",
        lambda: any(holder().startswith(n["metadata"]["name"] + "_") for n in news),
        timeout=60,
    )

    # Uninstall: what Helm rendered from templates/ goes; TabularJobs and the CRDs (crds/) stay.
    release.helm("uninstall", release.name, "--wait", "--timeout", "120s")
    for kind, ns in [
        ("deployment,serviceaccount,service,role,rolebinding", release.ns),
        ("role,rolebinding", release.jobs),
    ]:
        left = release.kubectl_json("get", kind, "-n", ns, "-l", f"app.kubernetes.io/instance={release.name}")
        assert not left["items"], [i["metadata"]["name"] for i in left["items"]]
    assert release.job()["status"]["phase"] == "Succeeded"
    cluster.kubectl("get", "crd", "tabularjobs.tabjob.dev")
