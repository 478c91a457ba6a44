"""The platform policy as the chart renders it: the `policy:` values as one set of strings, the data of a ConfigMap
the operator mounts and the first variable of a ValidatingAdmissionPolicy (and its binding); and the shared table of
cases (tests/unit/policy_cases.py) through the chart's CEL, evaluated by the API server's own admission code
(hack/vap), giving the Python check's verdicts and messages."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from hack.chart_tools import CHART, NON_DEFAULT, objects
from hack.vap_tool import evaluate
from tabjob.api.platform_policy import Policy, check_policy
from tests.unit.policy_cases import CASES, Case, root

DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())["policy"]
RULES = yaml.safe_load((CHART / "files" / "policy-rules.yaml").read_text())


def _policy_objects(*values: str) -> dict[str, Any]:
    return {o["kind"]: o for o in objects(*values) if o["metadata"]["name"].endswith("-policy")}


def _values_args(values: dict[str, Any]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set-json", f"policy.{key}={json.dumps(value)}")]


def _request(job: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    op = "CREATE" if old is None else "UPDATE"
    return {"object": job, "oldObject": old, "namespace": job["metadata"]["namespace"], "operation": op}


def _verdicts(values: dict[str, Any], requests: list[dict[str, Any]]) -> list[dict[str, list[str]]]:
    rendered = _policy_objects(*_values_args(values))
    return evaluate(rendered["ValidatingAdmissionPolicy"], None, requests)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_shared_table_through_the_api_server_s_cel(case: Case) -> None:
    job = case.manifest(namespace="ml")
    [verdict] = _verdicts(case.values, [_request(job)])
    assert verdict["errors"] == []
    python = [f"{path}: {msg}" for path, msg in check_policy(job["spec"], Policy.from_values(case.values))]
    # One message per rule: the first toleration a rule refuses, where the Python check names each.
    assert set(verdict["denied"]) <= set(python)
    assert sorted({root(m.split(": ")[0]) for m in verdict["denied"]}) == sorted({root(p) for p in case.refused})


def test_only_a_new_or_edited_spec_is_judged() -> None:
    breach = Case("x", {}, {"serviceAccountName": "ci-deployer"}).manifest("old", "ml")
    relabelled = {**breach, "metadata": {**breach["metadata"], "labels": {"team": "a"}}}
    edited = {**breach, "spec": {**breach["spec"], "preset": "high"}}
    verdicts = _verdicts({}, [_request(breach), _request(relabelled, breach), _request(edited, breach)])
    assert [bool(v["denied"]) for v in verdicts] == [True, False, True]


def test_the_configmap_holds_the_values_as_the_python_policy_reads_them() -> None:
    assert _policy_objects()["ConfigMap"]["data"] == Policy().to_data() == Policy.from_values(DEFAULTS).to_data()
    changed = {"priorityClasses": ["batch"], "tolerationKeys": ["*"], "serviceAccounts": ["default", "s3-reader"],
               "volumeSources": ["persistentVolumeClaim", "nfs"],
               "maxResources": {"cpus": 64, "gpus": 0.5, "memory": "256Gi"}}  # fmt: skip
    data = _policy_objects(*_values_args(changed))["ConfigMap"]["data"]
    assert Policy.from_data(data) == Policy.from_values(changed)
    assert data["maxCpus"] == "64" and data["maxGpus"] == "0.5" and data["maxMemory"] == "256Gi"


def test_the_admission_policy_is_the_rules_file_with_the_configmap_s_data_first() -> None:
    rendered = _policy_objects("--set-json", 'policy.maxResources={"gpus":0.5}')
    vap, binding = rendered["ValidatingAdmissionPolicy"], rendered["ValidatingAdmissionPolicyBinding"]
    first, *rest = vap["spec"]["variables"]
    assert first["name"] == "policy" and json.loads(first["expression"]) == rendered["ConfigMap"]["data"]
    assert rest == RULES["variables"]
    assert {k: vap["spec"][k] for k in ("matchConditions", "validations")} == {
        k: RULES[k] for k in ("matchConditions", "validations")
    }
    # No params: a built-in paramKind's informer can stop for good in kube-apiserver (templates/policy.yaml).
    assert "paramKind" not in vap["spec"] and "paramRef" not in binding["spec"]
    assert vap["spec"]["failurePolicy"] == "Fail"
    assert vap["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["tabularjobs"]  # not /status
    assert binding["spec"]["policyName"] == vap["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert "matchResources" not in binding["spec"]  # every namespace, as the operator serves every namespace


def test_a_namespaced_release_binds_only_its_namespaces() -> None:
    binding = _policy_objects("--set", "watchNamespaces={tj-a,tj-b}")["ValidatingAdmissionPolicyBinding"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["tj-a", "tj-b"]}
    ]


def test_admission_off_keeps_the_operator_s_half() -> None:
    rendered = _policy_objects("--set", "policy.admission=false")
    assert set(rendered) == {"ConfigMap"}


@pytest.mark.parametrize("values", [[], NON_DEFAULT], ids=["default", "non-default"])
def test_the_operator_mounts_the_same_configmap(values: list[str]) -> None:
    objs = objects(*values)
    (deploy,) = [o for o in objs if o["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == env["TABJOB_POLICY_DIR"]]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    (configmap,) = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-policy")]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"] and mount["readOnly"] is True
