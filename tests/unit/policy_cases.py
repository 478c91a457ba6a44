"""One table of platform-policy cases, run through every enforcer: the Python check (tests/unit/test_policy.py), the
chart's CEL through the API server's own evaluator (tests/chart/test_policy_chart.py) and a real API server
(tests/e2e/test_policy_e2e.py). Each case: the chart's `policy:` values that differ from its defaults, a spec patch,
and the fields the policy refuses."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tabjob.api import parse_manifest, to_manifest
from tests.unit.manifests import spec

GPU_JOB: dict[str, Any] = {"resources": {"cpus": 8, "gpus": 2, "memory": "16Gi"}, "models": {"NN_TORCH": [{}]}}
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PVC = {"persistentVolumeClaim": {"claimName": "datasets"}}


@dataclass(frozen=True)
class Case:
    id: str
    values: dict[str, Any]  # the chart's `policy:` values, merged over its defaults
    patch: dict[str, Any]  # merged into the base manifest's spec (tests/unit/manifests.py)
    refused: list[str] = field(default_factory=list)  # the field paths the policy names

    def manifest(self, name: str | None = None, namespace: str | None = None) -> dict[str, Any]:
        """The job as the API server stores it (the CRD's defaults written in), camelCase."""
        doc = spec(**self.patch)
        doc["metadata"]["name"] = name or re.sub(r"[^a-z0-9-]+", "-", self.id.lower()).strip("-")[:50]
        if namespace:
            doc["metadata"]["namespace"] = namespace
        return to_manifest(parse_manifest(doc))


def root(path: str) -> str:
    """The rule a path belongs to: spec.scheduling.tolerations[1].key -> spec.scheduling.tolerations."""
    return re.sub(r"\[\d+\].*$", "", path)


CASES = [
    Case("defaults admit a plain job", {}, {}),
    Case("system priority class", {}, {"scheduling": {"priorityClassName": "system-node-critical"}},
         ["spec.scheduling.priorityClassName"]),
    Case("system class named is allowed", {"priorityClasses": ["system-node-critical"]},
         {"scheduling": {"priorityClassName": "system-node-critical"}}),
    Case("star allows a non-system class", {}, {"scheduling": {"priorityClassName": "batch-low"}}),
    Case("narrowed priority classes", {"priorityClasses": ["batch-low"]},
         {"scheduling": {"priorityClassName": "batch-high"}}, ["spec.scheduling.priorityClassName"]),
    Case("no priority class allowed", {"priorityClasses": []}, {"scheduling": {"priorityClassName": "batch-low"}},
         ["spec.scheduling.priorityClassName"]),
    Case("no priority class asked under an empty list", {"priorityClasses": []}, {}),
    Case("GPU taint tolerated", {}, {"scheduling": {"tolerations": [GPU_TAINT]}}),
    Case("toleration of every taint", {}, {"scheduling": {"tolerations": [{"operator": "Exists"}]}},
         ["spec.scheduling.tolerations[0].key"]),
    Case("toleration of every taint under star", {"tolerationKeys": ["*"]},
         {"scheduling": {"tolerations": [{"operator": "Exists"}]}}),
    Case("control-plane taint after a GPU one", {},
         {"scheduling": {"tolerations": [GPU_TAINT, {"key": "node-role.kubernetes.io/control-plane",
                                                     "operator": "Exists"}]}},
         ["spec.scheduling.tolerations[1].key"]),
    Case("a listed taint with a value", {"tolerationKeys": ["dedicated"]},
         {"scheduling": {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml"}]}}),
    Case("default ServiceAccount by omission", {}, {}),
    Case("ServiceAccount not listed", {}, {"serviceAccountName": "ci-deployer"}, ["spec.serviceAccountName"]),
    Case("ServiceAccount listed", {"serviceAccounts": ["default", "s3-reader"]}, {"serviceAccountName": "s3-reader"}),
    Case("any ServiceAccount", {"serviceAccounts": ["*"]}, {"serviceAccountName": "ci-deployer"}),
    Case("default ServiceAccount not listed", {"serviceAccounts": ["s3-reader"]}, {}, ["spec.serviceAccountName"]),
    Case("secret data volume narrowed away", {"volumeSources": ["persistentVolumeClaim"]},
         {"data": {"volume": {"secret": {"secretName": "creds"}}}}, ["spec.data.volume.secret"]),
    Case("nfs output narrowed away", {"volumeSources": ["persistentVolumeClaim"]},
         {"data": {"volume": PVC}, "output": {"volume": {"nfs": {"server": "nfs.example", "path": "/out"}}}},
         ["spec.output.volume.nfs"]),
    Case("any volume", {"volumeSources": ["*"]}, {"data": {"volume": {"secret": {"secretName": "creds"}}}}),
    Case("CPUs over the ceiling", {"maxResources": {"cpus": 4}}, {}, ["spec.resources.cpus"]),
    Case("CPUs at the ceiling", {"maxResources": {"cpus": 8}}, {}),
    Case("GPUs over the ceiling", {"maxResources": {"gpus": 1}}, GPU_JOB, ["spec.resources.gpus"]),
    Case("half a GPU under a ceiling of none", {"maxResources": {"gpus": 0}},
         {"resources": {"cpus": 2, "gpus": 0.5}, "models": {"NN_TORCH": [{"resources": {"gpus": 0.5}}]}},
         ["spec.resources.gpus"]),
    Case("memory over the ceiling", {"maxResources": {"memory": "8Gi"}}, GPU_JOB, ["spec.resources.memory"]),
    Case("memory at the ceiling in other units", {"maxResources": {"memory": "16Gi"}},
         {**GPU_JOB, "resources": {**GPU_JOB["resources"], "memory": "17179869184"}}),
    Case("no memory asked under a ceiling", {"maxResources": {"memory": "1Gi"}}, {}),
    Case("several breaches at once", {"maxResources": {"cpus": 4}},
         {"serviceAccountName": "ci-deployer", "scheduling": {"priorityClassName": "system-cluster-critical"}},
         ["spec.scheduling.priorityClassName", "spec.serviceAccountName", "spec.resources.cpus"]),
]  # fmt: skip
