"""The generated CRD on a real kube-apiserver: accepted, examples admitted, CEL and strict fields refuse bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cluster.fixtures import Cluster

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
    assert header[:6] == ["NAME", "PHASE", "PROGRESS", "GPUS", "BEST", "SCORE"]
