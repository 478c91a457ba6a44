"""The operator's policy: which volume sources, priority classes and toleration keys a TabularJob may use."""

from __future__ import annotations

from typing import Any

import pytest

from tabjob.api import parse_manifest
from tabjob.policy import Policy, check_policy
from tests.unit.manifests import spec


def _spec(**patch: Any) -> Any:
    return parse_manifest(spec(**patch)).spec


PVC = {"persistentVolumeClaim": {"claimName": "datasets"}}


def test_default_policy_admits_the_examples_shape() -> None:
    s = _spec(
        data={"volume": PVC},
        output={"volume": {"nfs": {"server": "nfs.example", "path": "/exports/out"}}},
        scheduling={
            "priorityClassName": "batch-low",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    )
    assert check_policy(s, Policy()) == []


def test_system_priority_classes_need_naming() -> None:
    s = _spec(scheduling={"priorityClassName": "system-node-critical"})
    [(path, msg)] = check_policy(s, Policy())
    assert path == "spec.scheduling.priorityClassName" and "not allowed" in msg
    assert check_policy(s, Policy(priority_classes=("system-node-critical",))) == []
    assert check_policy(s, Policy(priority_classes=("*",))) != []  # "*" never grants a system class


def test_priority_classes_narrowed_to_a_list() -> None:
    s = _spec(scheduling={"priorityClassName": "batch-high"})
    [(path, msg)] = check_policy(s, Policy(priority_classes=("batch-low",)))
    assert path == "spec.scheduling.priorityClassName" and "batch-low" in msg


@pytest.mark.parametrize(
    ("toleration", "allowed", "refused"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, None, False),
        ({"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}, None, True),
        ({"operator": "Exists"}, None, True),  # tolerates every taint
        ({"operator": "Exists"}, ["*"], False),
        ({"key": "dedicated", "operator": "Equal", "value": "ml"}, ["dedicated"], False),
    ],
)
def test_toleration_keys(toleration: dict[str, str], allowed: list[str] | None, refused: bool) -> None:
    s = _spec(scheduling={"tolerations": [toleration]})
    problems = check_policy(s, Policy.from_lists(toleration_keys=allowed))
    assert bool(problems) == refused, problems
    assert all(path == "spec.scheduling.tolerations[0].key" for path, _ in problems)


def test_volume_sources_narrowed() -> None:
    s = _spec(data={"volume": {"secret": {"secretName": "creds"}}}, output={"volume": PVC})
    assert check_policy(s, Policy()) == []
    problems = check_policy(s, Policy.from_lists(volume_sources=["persistentVolumeClaim"]))
    assert problems == [
        ("spec.data.volume.secret", "secret volumes are not allowed here; this cluster allows persistentVolumeClaim")
    ]


def test_output_never_gets_a_read_only_source_even_when_allowed() -> None:
    # secret and configMap are read-only mounts: the CRD already refuses them for output; a policy cannot add them.
    s = _spec(output={"volume": PVC})
    assert check_policy(s, Policy.from_lists(volume_sources=["*"])) == []
