"""What `helm template` renders: the RBAC's reach, the watched-namespaces modes, leader election, and the restricted Pod
Security fields. (The API server's own PodSecurity admission checks the same in test_chart_dryrun.py.)"""

from __future__ import annotations

import pytest

from hack.chart_tools import NON_DEFAULT, objects

CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
ADMISSION = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}  # cluster-scoped too (policy.admission)


def _kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def _container(objs: list[dict]) -> dict:
    (deploy,) = _kind(objs, "Deployment")
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    return container


def test_default_serves_every_namespace_with_a_cluster_role() -> None:
    objs = objects()
    assert _container(objs)["args"] == ["--all-namespaces", "--health-port=8081", "--metrics-port=8080"]
    assert [o["kind"] for o in objs if o["kind"] in CLUSTER_SCOPED | ADMISSION] == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    assert all(r["metadata"]["name"].endswith(("-test", "-leader-election")) for r in _kind(objs, "Role"))
    (deploy,) = _kind(objs, "Deployment")
    assert deploy["spec"]["replicas"] == 2


def test_listed_namespaces_get_roles_and_nothing_cluster_wide() -> None:
    objs = objects("--set", "watchNamespaces={tj-a,tj-b}")
    assert _container(objs)["args"][:2] == ["--namespace=tj-a", "--namespace=tj-b"]
    assert not [o for o in objs if o["kind"] in CLUSTER_SCOPED]
    # The platform policy's admission half is cluster-scoped by nature (bound to these namespaces only); an installer
    # without rights to create it turns it off, and the operator still enforces the policy.
    assert {o["kind"] for o in objs if o["kind"] in ADMISSION} == ADMISSION
    assert not [o for o in objects("--set", "watchNamespaces={tj-a},policy.admission=false") if o["kind"] in ADMISSION]
    for kind in ("Role", "RoleBinding"):
        mine = [o for o in _kind(objs, kind) if not o["metadata"]["name"].endswith(("-test", "-leader-election"))]
        namespaces = {o["metadata"]["namespace"] for o in mine}
        assert namespaces == {"tj-a", "tj-b"}, kind


@pytest.mark.parametrize("values", [[], ["--set", "watchNamespaces={tj-a}"]], ids=["cluster", "namespaced"])
def test_rbac_is_least_privilege(values: list[str]) -> None:
    rules = [
        r
        for o in objects(*values)
        if o["kind"] in ("ClusterRole", "Role") and not o["metadata"]["name"].endswith("-test")
        for r in o["rules"]
    ]
    granted = {(g, res, v) for r in rules for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}
    resources = {res for _, res, _ in granted}
    assert "*" not in str(rules), "no wildcards"
    assert not resources & {
        "secrets",
        "pods/exec",
        "pods/attach",
        "pods/portforward",
        "nodes",
        "serviceaccounts",
        "roles",
        "rolebindings",
        "clusterroles",
        "clusterrolebindings",
    }
    assert not {v for _, _, v in granted} & {"escalate", "bind", "impersonate", "deletecollection", "update"} - {
        v for _, res, v in granted if res.endswith("/finalizers")
    }
    # What the operator needs (operator/tabjob/controller/RBAC.md); tested here so a removal is deliberate.
    for need in [
        ("tabjob.dev", "tabularjobs", "watch"),
        ("tabjob.dev", "tabularjobs/status", "patch"),
        ("tabjob.dev", "tabularjobs/finalizers", "update"),
        ("tabjob.dev", "tabularpredictions", "watch"),
        ("tabjob.dev", "tabularpredictions/status", "patch"),
        ("tabjob.dev", "tabularpredictions/finalizers", "update"),
        ("", "pods", "create"),
        ("", "configmaps", "create"),
        ("", "services", "create"),
        ("", "events", "create"),
    ]:
        assert need in granted, need


def test_lease_settings_reach_the_operator() -> None:
    objs = objects(*NON_DEFAULT)
    env = {e["name"]: e.get("value") for e in _container(objs)["env"]}
    assert env["TABJOB_LEADER_ELECTION"] == "true" and env["TABJOB_LEASE_NAME"] == "tabjob-ha"
    assert env["TABJOB_LEASE_DURATION"] == "30" and env["TABJOB_RENEW_DEADLINE"] == "20"
    (lease_role,) = [r for r in _kind(objs, "Role") if r["metadata"]["name"].endswith("-leader-election")]
    assert lease_role["rules"][1]["resourceNames"] == ["tabjob-ha"]
    assert env["TABJOB_TRAINER_IMAGE"] == "ghcr.io/tabjob/tabjob-trainer:0.1.0-cuda"
    assert env["TABJOB_RUN_AS_USER"] == "2000" and env["TABJOB_RENDEZVOUS_PORT"] == "29600"
    assert env["TABJOB_API_QPS"] == "5"
    assert _container(objs)["args"][2:] == ["--health-port=8181", "--metrics-port=9191", "--verbose"]
    assert _container(objs)["image"] == "ghcr.io/tabjob/tabjob-operator@sha256:" + "a" * 64


@pytest.mark.parametrize("values", [[], NON_DEFAULT], ids=["default", "non-default"])
def test_pods_meet_the_restricted_pod_security_level(values: list[str]) -> None:
    objs = objects(*values)
    pods = [o["spec"]["template"]["spec"] for o in _kind(objs, "Deployment")] + [o["spec"] for o in _kind(objs, "Pod")]
    assert len(pods) == 2  # the operator and the helm test pod
    for spec in pods:
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert not {"hostNetwork", "hostPID", "hostIPC"} & set(spec)
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
            assert sc["readOnlyRootFilesystem"] is True
            assert c["resources"]["limits"]["memory"]


def test_probes_resources_and_metrics_port() -> None:
    c = _container(objects(*NON_DEFAULT))
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"health": 8181, "metrics": 9191}
    assert c["resources"]["requests"]["cpu"]


def test_monitors_render_when_the_crds_exist() -> None:
    objs = objects(
        "--api-versions",
        "monitoring.coreos.com/v1/ServiceMonitor",
        "--api-versions",
        "monitoring.coreos.com/v1/PodMonitor",
        "--set",
        "metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true",
        "--set",
        "watchNamespaces={tj-a}",
    )
    (sm,) = _kind(objs, "ServiceMonitor")
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    (pm,) = _kind(objs, "PodMonitor")
    assert pm["spec"]["namespaceSelector"] == {"matchNames": ["tj-a"]}
    assert pm["spec"]["selector"]["matchExpressions"][0]["key"] == "tabjob.dev/job-name"


def test_metrics_off_drops_the_service_and_the_port() -> None:
    objs = objects("--set", "metrics.enabled=false")
    assert not _kind(objs, "Service")
    assert len(_kind(objs, "Pod")) == 1  # the helm test still runs, checking /healthz only
    assert "--metrics-port=0" in _container(objs)["args"]


def _granted(*values: str) -> set[tuple[str, str, str]]:
    rules = [r for o in objects(*values) if o["kind"] == "ClusterRole" for r in o["rules"]]
    return {(g, res, v) for r in rules for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}


def test_kueue_reads_come_and_go_with_kueue_enabled() -> None:
    kueue = {("kueue.x-k8s.io", "workloads", v) for v in ("get", "list", "watch")} | {("", "events", "list")}
    assert kueue <= _granted()
    assert not kueue & _granted("--set", "kueue.enabled=false")
