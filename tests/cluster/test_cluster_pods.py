"""Pods as containers from images: logs, exec, exit codes, Pod Security `restricted`, and an image that is not
there."""

from __future__ import annotations

import pytest

from hack.cluster.manifests import terminated, toolbox_pod
from tests.cluster.fixtures import Cluster

pytestmark = pytest.mark.e2e


def test_logs_and_exec(cluster: Cluster, namespace: str) -> None:
    cluster.apply(toolbox_pod("srv", "serve", ":8080", "hi", hostname="srv"), namespace)
    pod = cluster.wait_phase(namespace, "srv", "Running")
    status = pod["status"]["containerStatuses"][0]
    assert status["imageID"].startswith("sha256:") or "@sha256:" in status["imageID"]
    cluster.wait_for("the log line", lambda: "serving on" in cluster.kubectl("logs", "-n", namespace, "srv").stdout)
    out = cluster.kubectl("exec", "-n", namespace, "srv", "--", "/toolbox", "env").stdout
    assert "HOSTNAME=srv" in out.splitlines()


def test_exit_code_and_restart(cluster: Cluster, namespace: str) -> None:
    cluster.apply(toolbox_pod("fails", "exit", "3"), namespace)
    assert terminated(cluster.wait_phase(namespace, "fails", "Failed"))["exitCode"] == 3
    cluster.apply(toolbox_pod("again", "exit", "1", restart="OnFailure"), namespace)
    cluster.wait_for(
        "a restart",
        lambda: cluster.pod(namespace, "again")["status"].get("containerStatuses", [{}])[0].get("restartCount"),
        timeout=60,
    )


def test_restricted_namespaces_refuse_privileged_pods(cluster: Cluster, namespace: str) -> None:
    pod = toolbox_pod("root", "env")
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    proc = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=__import__("json").dumps(pod), check=False)
    assert proc.returncode != 0 and "restricted" in proc.stderr, proc.stderr


def test_an_image_that_cannot_be_pulled_names_itself(cluster: Cluster, namespace: str) -> None:
    image = "localhost/tabjob/absent:1"
    pod = toolbox_pod("absent", "env")
    pod["spec"]["containers"][0].update(image=image, imagePullPolicy="IfNotPresent")
    cluster.apply(pod, namespace)

    def waiting() -> dict[str, str] | None:
        statuses = cluster.pod(namespace, "absent")["status"].get("containerStatuses") or [{}]
        w = statuses[0].get("state", {}).get("waiting", {})
        return w if w.get("reason") in ("ErrImagePull", "ImagePullBackOff") else None

    reason = cluster.wait_for("a pull error", waiting, timeout=60)
    assert image in reason.get("message", ""), reason
