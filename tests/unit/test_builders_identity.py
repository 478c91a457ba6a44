"""Who the trainer pods run as and what they are told: spec.serviceAccountName, spec.env and spec.envFrom reach
every pod, and the names tabjob sets itself are declared once (pod_identity) and refused in a job's env."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tabjob.api import parse_manifest
from tabjob.api.errors import SpecError
from tabjob.api.pod_identity import (
    POD_ENV,
    POD_FIELD_ENV,
    RESERVED_ENV,
    RESERVED_PREFIXES,
    TORCHRUN_ENV,
    reserved_env_problem,
)
from tests.unit.test_builders import GPU_JOB, container, manifest, render

ROOT = Path(__file__).resolve().parents[2]
SECRET_ENV = {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "id"}}}
CONFIG_ENV = {"name": "REGION", "valueFrom": {"configMapKeyRef": {"name": "site", "key": "region", "optional": True}}}
ENV_FROM = [{"secretRef": {"name": "s3"}}, {"prefix": "SITE_", "configMapRef": {"name": "site", "optional": False}}]


def _names(pod: dict[str, Any]) -> list[str]:
    return [e["name"] for e in container(pod)["env"]]


@pytest.mark.parametrize("spec", [{}, GPU_JOB, {"resources": {"cpus": 8, "memory": "8Gi"}}], ids=["cpu", "gpu", "one"])
def test_pods_set_exactly_the_declared_names_in_order(spec: dict[str, Any]) -> None:
    pods, _, _ = render(manifest(**spec))
    for pod in pods:
        assert _names(pod) == [*POD_ENV, *POD_FIELD_ENV]
        assert all(reserved_env_problem(n) for n in _names(pod)), "every name tabjob sets is refused in spec.env"
        fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container(pod)["env"] if "valueFrom" in e}
        assert fields == POD_FIELD_ENV


def test_the_job_s_variables_follow_tabjob_s_in_every_pod() -> None:
    plain = {"name": "DATASET_VERSION", "value": "$(TABJOB_OUTPUT)/v3"}
    pods, _, _ = render(manifest(env=[plain, SECRET_ENV, CONFIG_ENV], envFrom=ENV_FROM))
    assert len(pods) == 2
    for pod in pods:
        env = container(pod)["env"]
        # After tabjob's own, so that $(TABJOB_OUTPUT) in a value refers to a variable defined before it.
        assert env[len(POD_ENV) + len(POD_FIELD_ENV) :] == [plain, SECRET_ENV, CONFIG_ENV]
        assert container(pod)["envFrom"] == ENV_FROM


def test_no_env_from_key_when_none_is_given() -> None:
    pods, _, _ = render(manifest())
    assert "envFrom" not in container(pods[0])


def test_pods_run_as_the_service_account_without_its_token_unless_asked() -> None:
    pods, _, _ = render(manifest(serviceAccountName="s3-reader"))
    for pod in pods:
        assert pod["spec"]["serviceAccountName"] == "s3-reader"
        assert pod["spec"]["automountServiceAccountToken"] is False
    pods, _, _ = render(manifest(serviceAccountName="s3-reader", automountServiceAccountToken=True))
    assert all(p["spec"]["automountServiceAccountToken"] is True for p in pods)
    pods, _, _ = render(manifest())
    assert "serviceAccountName" not in pods[0]["spec"]  # the namespace's default, as for any pod
    assert pods[0]["spec"]["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    "name", [*RESERVED_ENV, *(p + "ANYTHING" for p in RESERVED_PREFIXES), "PET_NNODES", "TABJOB_HOST_IP"]
)
def test_every_reserved_name_is_refused_naming_the_field_and_the_variable(name: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_manifest(manifest(env=[{"name": "OK", "value": "1"}, {"name": name, "value": "1"}]))
    [(path, message)] = err.value.problems
    assert path == "spec.env[1].name"
    assert message.startswith(f"{name} is set by tabjob itself") and "choose another name" in message


@pytest.mark.parametrize("name", ["AWS_REGION", "HF_HOME", "my.var", "-x", "MASTER_ADDRESS", "PETS", "RANKING"])
def test_names_near_the_reserved_ones_are_the_job_s(name: str) -> None:
    parse_manifest(manifest(env=[{"name": name, "value": "1"}]))


def test_torchrun_worker_names_are_reserved_though_the_operator_does_not_set_them() -> None:
    assert set(TORCHRUN_ENV) <= set(RESERVED_ENV)
    assert not set(TORCHRUN_ENV) & set(POD_ENV)


@pytest.mark.parametrize(
    ("spec", "path", "says"),
    [
        ({"env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]},
         "spec.env[0].valueFrom.fieldRef", "secretKeyRef or configMapKeyRef only"),
        ({"env": [{"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]},
         "spec.env[0].valueFrom.resourceFieldRef", "secretKeyRef or configMapKeyRef only"),
        ({"env": [{"name": "X", "valueFrom": {}}]}, "spec.env[0].valueFrom", "exactly one of secretKeyRef"),
        ({"env": [{"name": "X", "value": "1", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
         "spec.env[0]", "value or valueFrom, not both"),
        ({"env": [{"name": "X", "value": "1"}, {"name": "X", "value": "2"}]}, "spec.env[1].name", "given twice"),
        ({"env": [{"name": "2FAST", "value": "1"}]}, "spec.env[0].name", "not an environment variable name"),
        ({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "S3", "key": "k"}}}]},
         "spec.env[0].valueFrom.secretKeyRef.name", "DNS-1123 subdomain"),
        ({"envFrom": [{"prefix": "TABJOB_", "secretRef": {"name": "s"}}]}, "spec.envFrom[0].prefix",
         "would name every variable"),
        ({"envFrom": [{"prefix": "PET_X_", "configMapRef": {"name": "c"}}]}, "spec.envFrom[0].prefix",
         "would name every variable"),
        ({"envFrom": [{"secretRef": {"name": "s"}, "configMapRef": {"name": "c"}}]}, "spec.envFrom[0]",
         "exactly one of secretRef or configMapRef"),
        ({"serviceAccountName": "Trainer_SA"}, "spec.serviceAccountName", "ServiceAccount"),
        ({"automountServiceAccountToken": "true"}, "spec.automountServiceAccountToken", "true or false"),
    ],
)  # fmt: skip
def test_bad_identity_fields_name_the_field(spec: dict[str, Any], path: str, says: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_manifest(manifest(**spec))
    assert [p for p, _ in err.value.problems] == [path], err.value.problems
    assert says in err.value.problems[0][1]


def test_a_prefix_that_only_reads_like_a_reserved_one_is_allowed() -> None:
    parse_manifest(manifest(envFrom=[{"prefix": "TABJOBS", "secretRef": {"name": "s"}}]))


def test_render_shows_the_identity_fields(tmp_path: Path) -> None:
    doc = manifest(serviceAccountName="s3-reader", env=[SECRET_ENV], envFrom=ENV_FROM)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = subprocess.run(
        [sys.executable, "-m", "tabjob", "render", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    pods = [d for d in yaml.safe_load_all(out.stdout) if d["kind"] == "Pod"]
    assert pods and all(p["spec"]["serviceAccountName"] == "s3-reader" for p in pods)
    assert all(SECRET_ENV in p["spec"]["containers"][0]["env"] for p in pods)
    assert all(p["spec"]["containers"][0]["envFrom"] == ENV_FROM for p in pods)


def test_the_plan_configmap_leaves_the_pod_only_fields_out() -> None:
    # The trainer never reads them, a plain value stays in the TabularJob alone, and a trainer image older than these
    # fields still parses spec.json.
    doc = manifest(
        serviceAccountName="s3-reader", automountServiceAccountToken=True, env=[SECRET_ENV], envFrom=ENV_FROM
    )
    pods, _, cm = render(doc)
    spec = json.loads(cm["data"]["spec.json"])
    assert not {"serviceAccountName", "automountServiceAccountToken", "env", "envFrom"} & set(spec)
    assert spec["data"]["label"] == "target" and pods[0]["spec"]["serviceAccountName"] == "s3-reader"
    assert parse_manifest({**doc, "spec": spec}).spec.env == []
