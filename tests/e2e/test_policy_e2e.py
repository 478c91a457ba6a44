"""The platform policy and the identity fields on a real API server and operator.

The chart's policy objects (its ValidatingAdmissionPolicy and binding, rendered by helm for one test namespace)
refuse a breach at `kubectl apply`, with the Python check's message, for the whole shared table
(tests/unit/policy_cases.py); a breach that got in before any policy was bound stalls in the operator (which runs with
the chart's default policy) with reason PolicyViolation and no pods; an allowed job with env from a Secret and a
ConfigMap runs. The CRD's own CEL refuses a job's env that names one of tabjob's variables.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tabjob.api.platform_policy import Policy, check_policy
from tests.cluster.fixtures import Cluster
from tests.e2e.jobs import condition, job, pods, status, wait_phase
from tests.unit.policy_cases import CASES, Case

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
ADMISSION_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
PLAIN = Case("plain", {}, {})


def _render(cluster: Cluster, namespace: str, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The chart's policy objects for a release that serves `namespace` only (its binding selects nothing else)."""
    release = f"pol-{uuid.uuid4().hex[:6]}"
    sets = [a for k, v in values.items() for a in ("--set-json", f"policy.{k}={json.dumps(v)}")]
    proc = subprocess.run(
        [str(cluster.helm_path), "template", release, str(REPO / "charts" / "tabjob"), "-n", namespace,
         "--set", f"watchNamespaces={{{namespace}}}", *sets],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d and d["metadata"]["name"] == f"{release}-tabjob-policy"]
    return {d["kind"]: d for d in docs}


def _dry_run(cluster: Cluster, namespace: str, doc: dict[str, Any]) -> tuple[bool, str]:
    """(admitted, what the API server said) for creating `doc`, persisting nothing."""
    proc = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", input=json.dumps(doc), check=False)
    return proc.returncode == 0, proc.stderr.strip()


def _until(
    cluster: Cluster, namespace: str, probe: dict[str, Any], done: Callable[[bool, str], bool], what: str
) -> None:
    """Dry-run `probe` until `done(admitted, said)`: the API server's policy informers are asynchronous."""
    deadline = time.monotonic() + 60
    while not done(*(last := _dry_run(cluster, namespace, probe))):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; the API server said: {last[1]}")
        time.sleep(0.5)


# Breaches to tell that a binding is enforced: for any policy of the table, Python refuses at least one of them.
PROBES = [
    Case("probe", {}, {"serviceAccountName": "tabjob-e2e-probe"}),
    Case("probe", {}, {"scheduling": {"priorityClassName": "system-cluster-critical"}}),
]


@pytest.fixture
def bind_policy(cluster: Cluster, crd: Path) -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """bind(namespace, values): the chart's policy for `values`, enforced in `namespace` once this returns."""
    made: list[dict[str, Any]] = []

    def bind(namespace: str, values: dict[str, Any]) -> None:
        objs = _render(cluster, namespace, values)
        cluster.kubectl("apply", "-f", "-", input=json.dumps(objs["ConfigMap"]))
        admission = [objs[k] for k in ADMISSION_KINDS]
        made.extend(admission)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(admission))
        # The API server's policy informers are asynchronous: wait until a breach of this policy is refused, with
        # the Python check's message.
        policy = Policy.from_values(values)
        probe, refusal = next(
            (doc, problems[0])
            for case in PROBES
            if (problems := check_policy((doc := case.manifest("probe", namespace))["spec"], policy))
        )
        _until(cluster, namespace, probe, lambda ok, said: not ok and f"{refusal[0]}: {refusal[1]}" in said,
               "the admission policy to be enforced")  # fmt: skip

    yield bind
    for obj in made:
        cluster.kubectl("delete", obj["kind"], obj["metadata"]["name"], "--ignore-not-found", check=False)


def test_a_breach_is_refused_at_apply_naming_the_field_and_what_is_allowed(
    cluster: Cluster, namespace: str, bind_policy: Callable[[str, dict[str, Any]], None]
) -> None:
    bind_policy(namespace, {})
    breach = Case("x", {}, {"scheduling": {"priorityClassName": "system-node-critical",
                                            "tolerations": [{"operator": "Exists"}]}})  # fmt: skip
    proc = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(breach.manifest("breach")), check=False
    )
    assert proc.returncode != 0
    # The API server reports the first breach (`tabjob validate --policy` lists them all).
    assert (
        "denied request: spec.scheduling.priorityClassName: system-node-critical is not allowed; this cluster "
        "allows any but system-*" in proc.stderr
    ), proc.stderr
    assert cluster.kubectl("get", "tj", "breach", "-n", namespace, check=False).returncode != 0


GROUPS: dict[str, list[Case]] = {}
for _case in CASES:
    GROUPS.setdefault(json.dumps(_case.values, sort_keys=True), []).append(_case)


@pytest.mark.parametrize("values", list(GROUPS), ids=list(GROUPS))
def test_the_shared_table_on_the_api_server(
    cluster: Cluster, namespace: str, bind_policy: Callable[[str, dict[str, Any]], None], values: str
) -> None:
    bind_policy(namespace, json.loads(values))
    for case in GROUPS[values]:
        doc = case.manifest(namespace=namespace)
        admitted, said = _dry_run(cluster, namespace, doc)
        python = [f"{p}: {m}" for p, m in check_policy(doc["spec"], Policy.from_values(case.values))]
        assert admitted == (not case.refused), f"{case.id}: {said}"
        if python:  # the first breach, in the order both check them
            assert f"denied request: {python[0]}" in said, f"{case.id}: {said}"


def test_a_breach_that_got_in_first_stalls_with_no_pods(
    cluster: Cluster, namespace: str, operator: Any, bind_policy: Callable[[str, dict[str, Any]], None]
) -> None:
    # No policy is bound here yet, so the API server admits it; the operator holds the chart's default policy.
    breach = job(
        "early", scheduling={"priorityClassName": "system-node-critical", "tolerations": [{"operator": "Exists"}]}
    )
    cluster.apply(breach, namespace)
    st = cluster.wait_for(
        "the job to stall on the policy",
        lambda: s if condition(s := status(cluster, namespace, "early"), "Stalled").get("reason") == "PolicyViolation"
        else None,
        timeout=60,
    )  # fmt: skip
    assert st["phase"] == "Pending"
    assert "spec.scheduling.priorityClassName: system-node-critical is not allowed" in st["message"]
    assert pods(cluster, namespace, "early") == []
    assert cluster.kubectl("get", "configmap", "early-plan", "-n", namespace, check=False).returncode != 0
    # Once the policy is bound, the job may still be labelled (its spec is not judged again) but not edited while
    # it breaches.
    bind_policy(namespace, {})
    cluster.kubectl("label", "tj", "early", "-n", namespace, "team=a")
    edit = cluster.kubectl(
        "patch", "tj", "early", "-n", namespace, "--type=merge", "-p", '{"spec":{"timeLimitSeconds":200}}', check=False
    )
    assert edit.returncode != 0 and "spec.scheduling.priorityClassName" in edit.stderr, edit.stderr
    assert pods(cluster, namespace, "early") == []


def test_an_allowed_job_runs_as_its_account_with_its_variables(
    cluster: Cluster, namespace: str, operator: Any, bind_policy: Callable[[str, dict[str, Any]], None]
) -> None:
    bind_policy(namespace, {})
    cluster.kubectl("create", "secret", "generic", "s3", "-n", namespace, "--from-literal=id=AKIAEXAMPLE")
    cluster.kubectl("create", "configmap", "site", "-n", namespace, "--from-literal=REGION=eu-west-1")
    env = [{"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "id"}}}]
    env_from = [{"prefix": "SITE_", "configMapRef": {"name": "site"}}]
    allowed = job(
        "allowed", serviceAccountName="default", env=env, envFrom=env_from,
        scheduling={"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    )  # fmt: skip
    cluster.apply(allowed, namespace)
    wait_phase(cluster, namespace, "allowed", "Succeeded", timeout=300)
    for pod in pods(cluster, namespace, "allowed"):
        spec = pod["spec"]
        assert spec["serviceAccountName"] == "default" and spec["automountServiceAccountToken"] is False
        assert env[0] in spec["containers"][0]["env"]
        assert spec["containers"][0]["envFrom"] == env_from


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ([{"name": "MASTER_ADDR", "value": "elsewhere"}], "spec.env[0].name: Forbidden: MASTER_ADDR is set by tabjob"),
        ([{"name": "TABJOB_OUTPUT", "value": "/tmp"}], "spec.env[0].name: Forbidden: TABJOB_OUTPUT is set by tabjob"),
        ([{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
         'unknown field "spec.env[0].valueFrom.fieldRef"'),
    ],
)  # fmt: skip
def test_the_crd_refuses_tabjob_s_own_variables(
    cluster: Cluster, crd: Path, namespace: str, env: list[dict[str, Any]], says: str
) -> None:
    doc = PLAIN.manifest("env", namespace)
    doc["spec"]["env"] = env
    admitted, said = _dry_run(cluster, namespace, doc)
    assert not admitted and says in said, said
