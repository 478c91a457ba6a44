"""The platform's policy (tabjob.api.platform_policy): the table of cases every enforcer shares, through the Python
check, and how a policy is read from the chart's values, from its ConfigMap's data and from that ConfigMap mounted as
files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tabjob.api.platform_policy import Policy, PolicyError, check_policy, read_policy_dir
from tests.unit.policy_cases import CASES, Case

CHART_VALUES = Path(__file__).resolve().parents[2] / "charts" / "tabjob" / "values.yaml"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_shared_table(case: Case) -> None:
    problems = check_policy(case.manifest()["spec"], Policy.from_values(case.values))
    assert [path for path, _ in problems] == case.refused
    assert all("this cluster" in msg for _, msg in problems)


def test_messages_name_what_is_allowed() -> None:
    refusals = {
        path: msg
        for case in CASES
        for path, msg in check_policy(case.manifest()["spec"], Policy.from_values(case.values))
    }
    assert refusals["spec.scheduling.priorityClassName"].endswith("this cluster allows any but system-*")
    assert refusals["spec.serviceAccountName"] == "ci-deployer is not allowed; this cluster allows default"
    assert refusals["spec.scheduling.tolerations[0].key"] == (
        "a toleration without a key (it tolerates every taint) is not allowed; this cluster allows tolerating "
        "nvidia.com/gpu, amd.com/gpu"
    )
    assert refusals["spec.data.volume.secret"] == (
        "secret volumes are not allowed; this cluster allows persistentVolumeClaim"
    )
    assert refusals["spec.resources.gpus"] == "0.5 GPUs is over this cluster's ceiling of 0 a job"


def test_an_empty_list_says_who_can_widen_it() -> None:
    [(path, msg)] = check_policy(Case("x", {}, {"serviceAccountName": "a"}).manifest()["spec"], Policy(
        service_accounts=()))  # fmt: skip
    assert path == "spec.serviceAccountName" and "none (the platform team lists them" in msg


def test_the_chart_s_defaults_are_the_python_defaults() -> None:
    # An operator run without the chart's ConfigMap (TABJOB_POLICY_DIR unset) enforces what a default install does.
    values = yaml.safe_load(CHART_VALUES.read_text())["policy"]
    assert Policy.from_values(values) == Policy() == Policy.from_values({}) == Policy.from_values(None)


@pytest.mark.parametrize(
    "policy",
    [
        Policy(),
        Policy(priority_classes=(), toleration_keys=("*",), service_accounts=("a", "b"), volume_sources=("nfs",)),
        Policy(max_cpus=64, max_gpus=0.5, max_memory="256Gi"),
        Policy(max_gpus=0.0),
    ],
)
def test_configmap_data_round_trip(policy: Policy) -> None:
    assert Policy.from_data(policy.to_data()) == policy


def test_configmap_data_read_as_the_cel_reads_it() -> None:
    # A missing list allows nothing (fail closed), blanks and spaces around names are dropped, and an empty or
    # missing ceiling sets none: the CEL's variables.policy.?key.orValue("") does the same.
    policy = Policy.from_data({"serviceAccounts": " default , s3-reader,,", "maxCpus": " ", "maxGpus": "2"})
    assert policy.service_accounts == ("default", "s3-reader")
    assert policy.priority_classes == policy.toleration_keys == policy.volume_sources == ()
    assert (policy.max_cpus, policy.max_gpus, policy.max_memory) == (None, 2.0, None)


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"serviceAccount": ["x"]}, "policy.serviceAccount: unknown key"),
        ({"serviceAccounts": "default"}, "policy.serviceAccounts: a list of names"),
        ({"maxResources": {"cpu": 4}}, "policy.maxResources: a mapping of cpus, gpus and memory"),
        ({"maxResources": {"memory": "lots"}}, "maxMemory a quantity"),
        ({"maxResources": {"cpus": 1.5}}, "maxCpus is a whole number"),
    ],
)
def test_bad_values_name_the_key(values: dict, says: str) -> None:
    with pytest.raises(PolicyError, match=says):
        Policy.from_values(values)


def test_a_mounted_configmap_is_read_key_by_key(tmp_path: Path) -> None:
    # The kubelet's layout: each key a symlink into a timestamped directory it swaps atomically.
    policy = Policy(service_accounts=("default", "s3-reader"), max_cpus=32)
    data = tmp_path / "..2025_01_01"
    data.mkdir()
    (tmp_path / "..data").symlink_to(data.name)
    for key, value in policy.to_data().items():
        (data / key).write_text(value)
        (tmp_path / key).symlink_to(f"..data/{key}")
    assert read_policy_dir(tmp_path) == policy
    with pytest.raises(PolicyError, match="no such directory"):
        read_policy_dir(tmp_path / "missing")
