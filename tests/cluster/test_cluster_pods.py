"""The node agent runs pods as kubelet would: env, volumes, exit codes, restarts, termination messages, deletion."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.cluster.fixtures import Cluster
from tests.cluster.manifests import pod, terminated

pytestmark = pytest.mark.e2e


def test_env_and_volumes_reach_the_process(
    cluster: Cluster, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    host_dir = tmp_path_factory.mktemp("hostpath")
    (host_dir / "in.txt").write_text("from the host")
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg"},
            "data": {"mode": "fast", "settings.yaml": "lr: 0.1\n"},
        },
        namespace,
    )
    cluster.apply(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"token": "s3cr3t"}},
        namespace,
    )
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        namespace,
    )
    script = (
        'echo "$POD_NAME $POD_NS $POD_IP $MODE $TOKEN $GREETING"; cat /etc/cfg/settings.yaml; '
        "cat /etc/creds/token; echo; cat /host/in.txt; echo; echo kept > /data/out.txt; "
        "echo scratch > /scratch/x && cat /scratch/x; "
        "test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-mounted; "
        "touch /etc/cfg/nope 2>/dev/null || echo read-only; command -v python"
    )
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "GREETING", "value": "hello-$(MODE)"},
    ]
    mounts = [
        {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True},
        {"name": "creds", "mountPath": "/etc/creds"},
        {"name": "host", "mountPath": "/host"},
        {"name": "data", "mountPath": "/data"},
        {"name": "scratch", "mountPath": "/scratch"},
    ]
    volumes = [
        {"name": "cfg", "configMap": {"name": "cfg"}},
        {"name": "creds", "secret": {"secretName": "creds"}},
        {"name": "host", "hostPath": {"path": str(host_dir)}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    cluster.apply(pod("envvol", script, env=env, volumeMounts=mounts, volumes=volumes), namespace)
    done = cluster.wait_phase(namespace, "envvol", "Succeeded", "Failed")
    out = cluster.kubectl("logs", "-n", namespace, "envvol").stdout
    ip = done["status"]["podIP"]
    assert ip.startswith("127.10."), ip
    assert f"envvol {namespace} {ip} fast s3cr3t hello-fast" in out
    for expected in ("lr: 0.1", "from the host", "scratch", "token-mounted", "read-only", ".venv/bin/python"):
        assert expected in out
    assert done["status"]["phase"] == "Succeeded", out
    pvc = cluster.kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data")
    pv = cluster.kube.get(f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}")
    assert (Path(pv["spec"]["hostPath"]["path"]) / "out.txt").read_text() == "kept\n"


def test_exit_code_and_termination_message(cluster: Cluster, namespace: str) -> None:
    cluster.apply(pod("fails", "echo 'bad input' > /dev/termination-log; exit 3"), namespace)
    cluster.apply(
        pod("fallback", "echo last words; exit 2", terminationMessagePolicy="FallbackToLogsOnError"), namespace
    )
    cluster.apply(pod("ok", "true"), namespace)
    failed = terminated(cluster.wait_phase(namespace, "fails", "Failed"))
    assert (failed["exitCode"], failed["reason"], failed["message"]) == (3, "Error", "bad input\n")
    assert terminated(cluster.wait_phase(namespace, "fallback", "Failed"))["message"] == "last words\n"
    assert terminated(cluster.wait_phase(namespace, "ok", "Succeeded"))["exitCode"] == 0


def test_on_failure_restarts_until_success(cluster: Cluster, namespace: str) -> None:
    # The counter lives on an emptyDir, which survives container restarts as it does under kubelet.
    script = "n=$(cat /w/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /w/n; echo try $n; [ $n -ge 3 ]"
    cluster.apply(
        pod(
            "retry",
            script,
            restart="OnFailure",
            volumeMounts=[{"name": "w", "mountPath": "/w"}],
            volumes=[{"name": "w", "emptyDir": {}}],
        ),
        namespace,
    )
    done = cluster.wait_phase(namespace, "retry", "Succeeded", timeout=60)
    status = done["status"]["containerStatuses"][0]
    assert status["restartCount"] == 2
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert "try 2" in cluster.kubectl("logs", "-n", namespace, "retry", "--previous").stdout


def test_graceful_deletion_sends_sigterm_then_removes_the_pod(
    cluster: Cluster,
    namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    marker_dir = tmp_path_factory.mktemp("marker")
    script = "trap 'echo got-term > /m/term; exit 0' TERM; echo started > /m/started; while true; do sleep 0.1; done"
    cluster.apply(
        pod(
            "sleeper",
            script,
            volumeMounts=[{"name": "m", "mountPath": "/m"}],
            volumes=[{"name": "m", "hostPath": {"path": str(marker_dir)}}],
        ),
        namespace,
    )
    cluster.wait_phase(namespace, "sleeper", "Running")
    cluster.wait_for("the container to start", lambda: (marker_dir / "started").exists())
    started = time.monotonic()
    cluster.kubectl("delete", "pod", "-n", namespace, "sleeper", "--wait=true", "--timeout=30s")
    assert (marker_dir / "term").read_text() == "got-term\n"
    assert time.monotonic() - started < 5  # it exited on SIGTERM, well before the 5 s grace period ran out


def test_sigkill_after_the_grace_period(cluster: Cluster, namespace: str) -> None:
    cluster.apply(
        pod("stubborn", "trap '' TERM; while true; do sleep 0.1; done", terminationGracePeriodSeconds=1), namespace
    )
    cluster.wait_phase(namespace, "stubborn", "Running")
    cluster.kubectl("delete", "pod", "-n", namespace, "stubborn", "--wait=true", "--timeout=30s")
    assert cluster.kube.get(f"/api/v1/namespaces/{namespace}/pods/stubborn", ok_missing=True) is None


def test_init_containers_run_first_and_share_volumes(cluster: Cluster, namespace: str) -> None:
    cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "opts"}, "data": {"A": "1", "B": "2"}},
        namespace,
    )
    manifest = pod(
        "staged",
        "cat /work/stage/ready; echo OPT_A=$OPT_A OPT_B=$OPT_B; cat /podinfo/labels",
        envFrom=[{"configMapRef": {"name": "opts"}, "prefix": "OPT_"}],
        volumeMounts=[
            {"name": "work", "mountPath": "/work/stage", "subPath": "stage"},
            {"name": "info", "mountPath": "/podinfo"},
        ],
        volumes=[
            {"name": "work", "emptyDir": {}},
            {
                "name": "info",
                "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
            },
        ],
    )
    manifest["metadata"]["labels"] = {"team": "tabular"}
    manifest["spec"]["initContainers"] = [
        {
            "name": "prepare",
            "image": "ignored.local/none",
            "command": ["sh", "-c", "mkdir -p /out/stage && echo prepared > /out/stage/ready"],
            "volumeMounts": [{"name": "work", "mountPath": "/out"}],
        }
    ]
    cluster.apply(manifest, namespace)
    done = cluster.wait_phase(namespace, "staged", "Succeeded", "Failed")
    out = cluster.kubectl("logs", "-n", namespace, "staged").stdout
    assert out.splitlines() == ["prepared", "OPT_A=1 OPT_B=2", 'team="tabular"'], out
    assert done["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert cluster.kubectl("logs", "-n", namespace, "staged", "-c", "prepare").stdout == ""


def test_missing_configmap_waits_then_runs(cluster: Cluster, namespace: str) -> None:
    env = [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "late", "key": "x"}}}]
    cluster.apply(pod("patient", "echo x=$X", env=env), namespace)

    def waiting_reason() -> str | None:
        statuses = cluster.pod(namespace, "patient").get("status", {}).get("containerStatuses", [])
        return statuses[0]["state"].get("waiting", {}).get("reason") if statuses else None

    assert cluster.wait_for("a config error", lambda: waiting_reason() == "CreateContainerConfigError")
    cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}, "data": {"x": "42"}}, namespace
    )
    cluster.wait_phase(namespace, "patient", "Succeeded")
    assert cluster.kubectl("logs", "-n", namespace, "patient").stdout == "x=42\n"


def test_a_volume_over_the_checkout_keeps_the_venv_and_state_visible(cluster: Cluster, namespace: str) -> None:
    """An emptyDir at /tmp hid a checkout cloned under /tmp (and its .venv, and the cluster's state): the agent
    binds them back. Mounting over the checkout's own parent exercises that wherever the checkout lives."""
    repo = Path(__file__).resolve().parents[2]
    cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}, "data": {"k": "v"}}, namespace
    )
    script = f"python -c 'import sys; print(sys.prefix)'; cat /etc/deep/k; echo; touch {repo.parent}/scratch && echo ok"
    mounts = [{"name": "over", "mountPath": str(repo.parent)}, {"name": "deep", "mountPath": "/etc/deep"}]
    volumes = [{"name": "over", "emptyDir": {}}, {"name": "deep", "configMap": {"name": "deep"}}]
    cluster.apply(pod("over", script, volumeMounts=mounts, volumes=volumes), namespace)
    done = cluster.wait_phase(namespace, "over", "Succeeded", "Failed")
    out = cluster.kubectl("logs", "-n", namespace, "over").stdout
    assert done["status"]["phase"] == "Succeeded", out
    assert str(repo / ".venv") in out and "v\nok" in out
    assert not (repo.parent / "scratch").exists(), "the emptyDir, not the host directory, took the write"
