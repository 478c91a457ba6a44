"""The generated CRD on a real kube-apiserver: accepted, examples admitted, CEL and strict fields refuse bad input."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def _job(**spec_patch: object) -> dict:
    doc = yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text())
    doc["metadata"]["name"] = "cel"
    doc["spec"].update(spec_patch)
    return doc


def test_every_example_is_admitted(cluster: Cluster, crd: Path, namespace: str) -> None:
    for example in sorted((REPO / "examples").glob("*.yaml")):
        doc = yaml.safe_load(example.read_text())
        doc["metadata"]["namespace"] = namespace
        out = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(doc))
        assert "created (server dry run)" in out.stdout, example


@pytest.mark.parametrize(
    ("patch", "says"),
    [
        ({"bagging": {"folds": 1}}, "spec.bagging.folds: Invalid value: folds must be 0 (no bagging) or at least 2"),
        (
            {"resources": {"cpus": 2, "gpus": 0.3}},
            "spec.resources.gpus: Invalid value: gpus must be a whole number or a fraction",
        ),
        (
            {"models": {"NN_TORCH": [{"resources": {"gpus": 0.4}}]}},
            "spec.models.NN_TORCH[0].resources.gpus: Invalid value: gpus must be a whole number or a fraction",
        ),
        (
            {"tuning": {"searchSpace": {"GBM": {"lr": {"uniform": [0, 1], "logUniform": [0.1, 1]}}}}},
            "set only one of int, uniform, logUniform, choice",
        ),
        ({"bagginng": {"folds": 2}}, 'unknown field "spec.bagginng"'),
        ({"onGpuUnavailable": "Ignore"}, 'spec.onGpuUnavailable: Unsupported value: "Ignore"'),
    ],
)
def test_api_server_refuses_with_the_field(cluster: Cluster, crd: Path, namespace: str, patch: dict, says: str) -> None:
    out = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(_job(**patch)), check=False)
    assert out.returncode != 0
    assert says in out.stderr, out.stderr


def test_fractions_that_divide_a_gpu_are_admitted(cluster: Cluster, crd: Path, namespace: str) -> None:
    doc = _job(
        resources={"cpus": 8, "gpus": 2},
        models={"NN_TORCH": [{"resources": {"gpus": g}} for g in (0.5, 0.25, 1 / 3, 1, 2)]},
    )
    out = cluster.kubectl("apply", "-n", namespace, "--dry-run=server", "-f", "-", input=yaml.safe_dump(doc))
    assert "created" in out.stdout


def test_spec_is_frozen_while_running_and_free_when_suspended(cluster: Cluster, crd: Path, namespace: str) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(_job()))

    def set_phase(phase: str) -> None:
        cluster.kubectl(
            "patch", "tj", "cel", "-n", namespace, "--subresource=status", "--type=merge",
            "-p", f'{{"status":{{"phase":"{phase}"}}}}',
        )  # fmt: skip

    set_phase("Running")
    change = ["patch", "tj", "cel", "-n", namespace, "--type=merge", "-p", '{"spec":{"bagging":{"folds":4}}}']
    refused = cluster.kubectl(*change, check=False)
    assert refused.returncode != 0
    assert "cannot change while the job is Running" in refused.stderr
    # Suspending is always allowed; once Suspended the spec may change.
    cluster.kubectl(
        "patch", "tj", "cel", "-n", namespace, "--type=merge", "-p", '{"spec":{"runPolicy":{"suspend":true}}}'
    )
    set_phase("Suspended")
    cluster.kubectl(*change)
    got = yaml.safe_load(cluster.kubectl("get", "tj", "cel", "-n", namespace, "-o", "yaml").stdout)
    assert got["spec"]["bagging"]["folds"] == 4
    # Defaults come from the schema: the API server filled them in.
    assert got["spec"]["ensemble"]["size"] == 25 and got["spec"]["onGpuUnavailable"] == "Fail"


def test_explain_and_columns(cluster: Cluster, crd: Path, namespace: str) -> None:
    out = cluster.kubectl("explain", "tabularjob.spec.bagging.resources").stdout
    assert "Resources of one bagged model" in out and "gpus" in out
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(_job()))
    header = cluster.kubectl("get", "tj", "-n", namespace).stdout.splitlines()[0].split()
    assert header[:7] == ["NAME", "PHASE", "PROGRESS", "GPUS", "ADMISSION", "BEST", "SCORE"]


# ------------------------------------------------------------------ validate and the API server agree

HOSTILE = REPO / "tests" / "unit" / "hostile"
HOSTILE_EXPECTED: dict[str, str] = yaml.safe_load((HOSTILE / "expected.yaml").read_text())
# Refused by kubectl before any request (not JSON, or not its namespace).
CLIENT_REFUSES = {
    "alias-bomb.yaml", "binary.png", "gpus-inf.yaml", "gpus-nan.yaml", "hyperparameter-nan.yaml",
    "namespace-underscore.yaml",
}  # fmt: skip
# What only the planner can know: the API server admits these, the operator refuses them before creating anything.
PLANNER_ONLY = {
    "128-pods.yaml", "65-cpu-pods.yaml", "configmap-over-1mib.yaml", "sklearn-label.yaml", "sklearn-metric.yaml",
    "sklearn-mixed.yaml", "sklearn-problem.yaml", "sklearn-split.yaml", "sklearn-unknown.yaml",
}  # fmt: skip
# Where validate is stricter than kubectl: kubectl keeps the last of two keys, re-encodes Latin-1 and UTF-16,
# turns 1: into "1" and !!binary into a string, takes generateName; memory past 1Pi is accepted as a quantity.
VALIDATE_STRICTER = {
    "duplicate-key.yaml", "latin1.yaml", "utf16.yaml", "integer-key.yaml", "yaml-binary-value.yaml",
    "deep-nesting.yaml", "name-missing.yaml", "memory-2Ei.yaml",
}  # fmt: skip


# kubectl's words when the API server did not judge the object at all (busy, restarting, etcd slow): asked again.
# Once, under load, the fuzz check below failed and its shrinking failed even the smallest valid manifest, which a
# rerun admitted: a server that did not answer is not a server that refused.
_NOT_JUDGED = (
    "Unable to connect to the server", "connection refused", "the server is currently unable to handle the request",
    "etcdserver: request timed out", "TLS handshake timeout", "context deadline exceeded", "connection reset by peer",
    "the server was unable to return a response", "Client.Timeout exceeded",
)  # fmt: skip


def _server_dry_run(cluster: Cluster, namespace: str, path: Path) -> subprocess.CompletedProcess[str]:
    deadline = time.monotonic() + 60
    while True:
        out = cluster.kubectl("create", "--dry-run=server", "-n", namespace, "-f", str(path), check=False)
        if out.returncode == 0 or not any(w in out.stderr for w in _NOT_JUDGED) or time.monotonic() > deadline:
            return out
        time.sleep(1)


@pytest.mark.parametrize("name", sorted(set(HOSTILE_EXPECTED) - CLIENT_REFUSES - PLANNER_ONLY - VALIDATE_STRICTER))
def test_the_crd_refuses_what_validate_refuses(cluster: Cluster, crd: Path, namespace: str, name: str) -> None:
    out = _server_dry_run(cluster, namespace, HOSTILE / "cases" / name)
    assert out.returncode != 0, f"{name}: validate refuses it ({HOSTILE_EXPECTED[name]}) but the API server admits it"


@pytest.mark.parametrize("name", sorted(PLANNER_ONLY | VALIDATE_STRICTER))
def test_the_known_differences_are_still_differences(cluster: Cluster, crd: Path, namespace: str, name: str) -> None:
    # When the API server starts refusing one of these, move it to the list above.
    out = _server_dry_run(cluster, namespace, HOSTILE / "cases" / name)
    assert out.returncode == 0, out.stderr


def test_whatever_validate_accepts_the_api_server_admits(
    cluster: Cluster, crd: Path, namespace: str, tmp_path: Path
) -> None:
    from hypothesis import HealthCheck, given, settings

    from tabjob.cli.validate import problems_of
    from tests.unit.hostile.fuzz_manifests import manifests

    seen = {"accepted": 0, "refused": 0, "refused_by_validate_only": 0}
    stuck: list[str] = []

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(manifests())
    def check(doc: dict) -> None:
        path = tmp_path / "job.yaml"
        path.write_text(yaml.safe_dump(doc, allow_unicode=True))
        problems, _ = problems_of(str(path))
        out = _server_dry_run(cluster, namespace, path)
        if problems:
            seen["refused"] += 1
            seen["refused_by_validate_only"] += out.returncode == 0
        else:
            seen["accepted"] += 1
            if out.returncode != 0:
                stuck.append(f"{path.read_text()}\n--> {out.stderr.strip()}")
        assert not stuck, stuck[-1]

    check()
    print(f"fuzz agreement: {seen}")
    assert seen["accepted"] >= 20, f"too few valid manifests to show agreement: {seen}"


@pytest.mark.parametrize("name", ["128-pods.yaml", "65-cpu-pods.yaml", "configmap-over-1mib.yaml"])
def test_planner_only_limits_stall_the_job_with_the_limit_named(
    cluster: Cluster, operator: Operator, namespace: str, name: str
) -> None:
    # The API server admits these; the operator's planner refuses them before creating a single child, and says
    # which limit and which field in the Stalled condition (they once left the job with no status at all).
    doc = yaml.safe_load((HOSTILE / "cases" / name).read_text())
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    job = str(doc["metadata"]["name"])

    def stalled() -> dict | None:
        got = yaml.safe_load(cluster.kubectl("get", "tj", job, "-n", namespace, "-o", "yaml").stdout)
        conditions = {c["type"]: c for c in (got.get("status") or {}).get("conditions", [])}
        return conditions["Stalled"] if conditions.get("Stalled", {}).get("status") == "True" else None

    condition = cluster.wait_for(f"{job} to stall", stalled, timeout=60)
    assert condition["reason"] == "InvalidSpec"
    assert HOSTILE_EXPECTED[name].split(": ", 1)[0] in condition["message"]  # the field
    assert "over" in condition["message"]  # ... and the limit it would pass
    children = cluster.kubectl("get", "pods,configmaps,services", "-n", namespace, "-l", f"tabjob.dev/job-name={job}")
    assert "No resources found" in children.stderr + children.stdout
