"""Builders: spec + plan -> ConfigMap, headless Service and torchrun pods, compared as plain dicts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tabjob.api import LABEL_ATTEMPT, LABEL_JOB, LABEL_RANK, parse_manifest
from tabjob.controller.config import Settings
from tabjob.controller.policy.builders import JobRef, build_children, pod_name
from tabjob.planner import plan_job

REF = JobRef(name="adult", namespace="ml", uid="uid-1", generation=3)
SETTINGS = Settings(default_image="trainer:test", rendezvous_port=29500, progress_port=29501)


def manifest(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "data": {"train": "sklearn://breast_cancer", "label": "target"},
        "output": {"path": "/output/adult"},
        "resources": {"cpus": 2, "cpusPerPod": 1, "memory": "2Gi"},
        "models": {"GBM": [{}]},
        "bagging": {"folds": 2},
    }
    base.update(spec)
    return {"apiVersion": "tabjob.dev/v1alpha1", "kind": "TabularJob", "metadata": {"name": "adult"}, "spec": base}


def render(doc: dict[str, Any], attempt: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    job = parse_manifest(doc)
    children = build_children(job, plan_job(job), REF, attempt, SETTINGS)
    return children.pods, children.service, children.configmap


def env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "<ref>") for e in pod["spec"]["containers"][0]["env"]}


def container(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["spec"]["containers"][0]


GPU_JOB: dict[str, Any] = {
    "resources": {"cpus": 8, "gpus": 4, "memory": "32Gi", "gpusPerPod": 2},
    "models": {"NN_TORCH": [{"resources": {"cpus": 2, "gpus": 1}}]},
    "bagging": {"folds": 4},
}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # (spec overrides, [(cpu, memory, gpu limit or None, nproc)] per pod)
        ({}, [("1", "1Gi", None, 1), ("1", "1Gi", None, 1)]),
        ({"resources": {"cpus": 2, "memory": "2Gi"}}, [("2", "2Gi", None, 2)]),
        (GPU_JOB, [("4", "16Gi", "2", 2), ("4", "16Gi", "2", 2)]),
        (
            {**GPU_JOB, "resources": {**GPU_JOB["resources"], "gpuResource": "amd.com/gpu"}},
            [("4", "16Gi", "2", 2), ("4", "16Gi", "2", 2)],
        ),
    ],
)
def test_pods_follow_the_plan(spec: dict[str, Any], expected: list[tuple[str, str, str | None, int]]) -> None:
    doc = manifest(**spec)
    pods, _, _ = render(doc)
    gpu_resource = doc["spec"]["resources"].get("gpuResource", "nvidia.com/gpu")
    got = []
    for pod in pods:
        res = container(pod)["resources"]
        assert res["requests"]["cpu"] == res["limits"]["cpu"]
        assert gpu_resource not in res["requests"]  # extended resources: the limit is the request
        gpu = res["limits"].get(gpu_resource)
        assert gpu is None or gpu == str(int(gpu)), "GPU limits are whole numbers"
        got.append((res["limits"]["cpu"], res["limits"].get("memory"), gpu, int(env(pod)["PET_NPROC_PER_NODE"])))
    assert got == expected


def test_torchrun_group_rendezvous_on_pod_zero() -> None:
    pods, service, _ = render(manifest())
    assert [p["metadata"]["name"] for p in pods] == ["adult-0", "adult-1"]
    for index, pod in enumerate(pods):
        c = container(pod)
        assert c["command"] == ["python", "-m", "tabjob_trainer.launch", "torchrun"]
        assert c["args"][-2:] == ["-m", "tabjob_trainer"]
        assert "--nnodes=2" in c["args"]
        assert "--nproc-per-node=1" in c["args"]
        assert f"--node-rank={index}" in c["args"]
        assert "--rdzv-backend=c10d" in c["args"]
        # Every rank, pod 0 included, names the store by the headless Service's DNS record.
        assert "--rdzv-endpoint=adult-0.adult.ml.svc:29500" in c["args"]
        assert f"--rdzv-conf=is_host={int(index == 0)},read_timeout=600" in c["args"]
        e = env(pod)
        assert e["MASTER_ADDR"] == "adult-0.adult.ml.svc"
        assert e["MASTER_PORT"] == "29500"
        assert (e["WORLD_SIZE"], e["RANK"], e["PET_NNODES"], e["PET_NODE_RANK"]) == ("2", str(index), "2", str(index))
        assert e["PYTHONUNBUFFERED"] == "1"
        assert e["OMP_NUM_THREADS"] == "1"
        assert e["TABJOB_PLAN"] == "/etc/tabjob/plan.json"
        assert e["TABJOB_SPEC"] == "/etc/tabjob/spec.json"
        assert e["TABJOB_OUTPUT"] == "/output/adult"
        assert pod["spec"]["hostname"] == f"adult-{index}"
        assert pod["spec"]["subdomain"] == "adult"
    assert service["metadata"]["name"] == "adult"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {LABEL_JOB: "adult"}
    assert service["spec"]["publishNotReadyAddresses"] is True


def test_threads_follow_cpus_per_rank() -> None:
    pods, _, _ = render(manifest(resources={"cpus": 8, "memory": "8Gi"}, bagging={"folds": 2}))
    assert len(pods) == 1
    nproc = int(env(pods[0])["PET_NPROC_PER_NODE"])
    assert env(pods[0])["OMP_NUM_THREADS"] == str(8 // nproc)


def test_metadata_labels_and_owner() -> None:
    pods, service, cm = render(manifest(), attempt=2)
    for obj in [*pods, service, cm]:
        meta = obj["metadata"]
        assert meta["namespace"] == "ml"
        assert meta["labels"][LABEL_JOB] == "adult"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "tabjob.dev/v1alpha1",
                "kind": "TabularJob",
                "name": "adult",
                "uid": "uid-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    assert [p["metadata"]["labels"][LABEL_RANK] for p in pods] == ["0", "1"]
    assert {p["metadata"]["labels"][LABEL_ATTEMPT] for p in pods} == {"2"}
    assert [p["metadata"]["name"] for p in pods] == ["adult-0-r2", "adult-1-r2"]
    # A retry keeps the hostnames, so the rendezvous name stays the same.
    assert [p["spec"]["hostname"] for p in pods] == ["adult-0", "adult-1"]


@pytest.mark.parametrize(
    ("index", "attempt", "name"), [(0, 0, "adult-0"), (3, 0, "adult-3"), (0, 1, "adult-0-r1"), (2, 7, "adult-2-r7")]
)
def test_pod_names_are_deterministic(index: int, attempt: int, name: str) -> None:
    assert pod_name("adult", index, attempt) == name


def test_configmap_holds_spec_and_plan() -> None:
    doc = manifest()
    _, _, cm = render(doc)
    assert cm["metadata"]["name"] == "adult-plan"
    plan = json.loads(cm["data"]["plan.json"])
    assert plan["worldSize"] == 2 and len(plan["pods"]) == 2
    spec = json.loads(cm["data"]["spec.json"])
    assert spec["data"]["label"] == "target"


def test_volumes_data_read_only_and_output() -> None:
    doc = manifest(
        data={"train": "/data/t.csv", "label": "y", "volume": {"persistentVolumeClaim": {"claimName": "datasets"}}},
        output={"path": "/output/x", "volume": {"persistentVolumeClaim": {"claimName": "out"}}},
    )
    pods, _, _ = render(doc)
    spec = pods[0]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in container(pods[0])["volumeMounts"]}
    assert volumes["data"] == {"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}
    assert mounts["data"] == {"name": "data", "mountPath": "/data", "readOnly": True}
    assert volumes["output"] == {"name": "output", "persistentVolumeClaim": {"claimName": "out"}}
    assert mounts["output"]["mountPath"] == "/output" and not mounts["output"].get("readOnly")
    assert volumes["plan"] == {"name": "plan", "configMap": {"name": "adult-plan"}}
    assert mounts["plan"] == {"name": "plan", "mountPath": "/etc/tabjob", "readOnly": True}


def test_no_output_volume_gets_an_empty_dir() -> None:
    pods, _, _ = render(manifest())
    volumes = {v["name"]: v for v in pods[0]["spec"]["volumes"]}
    assert volumes["output"] == {"name": "output", "emptyDir": {}}
    assert "data" not in volumes


def test_scheduling_and_kueue() -> None:
    doc = manifest(
        scheduling={
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "high",
            "queueName": "team-a",
        }
    )
    pods, _, _ = render(doc, attempt=1)
    for pod in pods:
        spec, meta = pod["spec"], pod["metadata"]
        assert spec["nodeSelector"] == {"pool": "gpu"}
        assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        assert spec["priorityClassName"] == "high"
        assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
        assert meta["labels"]["kueue.x-k8s.io/pod-group-name"] == "adult-1"
        assert meta["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "2"


def test_no_scheduling_fields_when_unset() -> None:
    pods, _, _ = render(manifest())
    spec, meta = pods[0]["spec"], pods[0]["metadata"]
    assert not {"nodeSelector", "tolerations", "priorityClassName"} & spec.keys()
    assert not any(k.startswith("kueue.x-k8s.io") for k in {**meta["labels"], **meta["annotations"]})


def test_restricted_pod_security_and_termination_message() -> None:
    pods, _, _ = render(manifest())
    spec = pods[0]["spec"]
    c = container(pods[0])
    assert spec["restartPolicy"] == "Never"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert not any(v.get("hostPath") for v in spec["volumes"])
    assert spec["automountServiceAccountToken"] is False


def test_image_from_spec_or_settings() -> None:
    pods, _, _ = render(manifest())
    assert container(pods[0])["image"] == "trainer:test"
    pods, _, _ = render(manifest(image="example/t:1"))
    assert container(pods[0])["image"] == "example/t:1"


def test_ports_are_fixed_per_installation_and_the_root_filesystem_read_only() -> None:
    job = parse_manifest(manifest())
    plan = plan_job(job)
    a = build_children(job, plan, REF, 0, SETTINGS)
    b = build_children(job, plan, JobRef("other", "ml", "uid-2"), 0, SETTINGS)
    # Each pod has its own network namespace: two jobs use the same ports without clashing.
    assert env(a.pods[0])["MASTER_PORT"] == env(b.pods[0])["MASTER_PORT"] == "29500"
    assert a.service["spec"]["ports"][0]["port"] == 29500
    for pod in a.pods:
        c = container(pod)
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        (tmp,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
        assert {"name": tmp["name"], "emptyDir": {}} in pod["spec"]["volumes"]


def test_every_pod_names_its_metrics_port_and_the_trainer_is_told() -> None:
    pods, _, _ = render(manifest())
    assert len(pods) > 1
    for pod in pods:
        named = {p["name"]: p["containerPort"] for p in container(pod)["ports"]}
        assert named["metrics"] == SETTINGS.metrics_port == int(env(pod)["TABJOB_METRICS_PORT"])
    assert "progress" not in {p["name"] for p in container(pods[1])["ports"]}
