"""What a platform allows TabularJobs to ask of its cluster: priority classes, toleration keys, ServiceAccounts,
volume kinds, and a ceiling on one job's CPUs, GPUs and memory.

The chart's `policy:` values are the one source. The chart renders them once as flat strings (``Policy.from_data``
reads them) that two enforcers hold: the API server, as the first variable of a ValidatingAdmissionPolicy whose CEL
(charts/tabjob/files/policy-rules.yaml) refuses a breach at `kubectl apply`, and the operator, which mounts them as a
ConfigMap (``read_policy_dir``) and stalls a job that got in before the policy existed (controller/policy/
platform.py: reason PolicyViolation, no pods). `tabjob validate --policy values.yaml` applies ``Policy.from_values``
offline. ``check_policy`` reads the spec as the API server stores it (camelCase JSON), as the CEL does, and the same
table of cases runs through both (tests/unit/policy_cases.py).

Defaults, the chart's too: any priority class but Kubernetes' own ``system-*`` ones; tolerations of the GPU taints
only; the namespace's ``default`` ServiceAccount only; every volume kind the CRD admits; no ceilings. Kubernetes has
no permission to *use* a ServiceAccount, a priority class or a toleration: whoever may create pods in a namespace
may run them as any of its ServiceAccounts. A user who may create TabularJobs but not pods gets pods all the same,
made by the operator, so without these lists that user would gain every ServiceAccount of the namespace (and the
API rights and cloud identity bound to it), ``system-node-critical``, or a toleration of every taint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabjob.api.base import parse_quantity
from tabjob.api.volumes import DATA_VOLUME_SOURCES

ANY = "*"
# Kubernetes reserves the prefix for its own classes (system-node-critical, system-cluster-critical): "*" never
# grants one; it must be named.
SYSTEM_PREFIX = "system-"
GPU_TAINTS = ("nvidia.com/gpu", "amd.com/gpu")
DEFAULT_SERVICE_ACCOUNT = "default"

# The ConfigMap's keys (also the keys of the CEL's variables.policy) and the chart values' keys under `policy:`.
LISTS = {
    "priorityClasses": "priority_classes",
    "tolerationKeys": "toleration_keys",
    "serviceAccounts": "service_accounts",
    "volumeSources": "volume_sources",
}
CEILINGS = {"maxCpus": "max_cpus", "maxGpus": "max_gpus", "maxMemory": "max_memory"}
# values.yaml: policy.maxResources.{cpus,gpus,memory} -> the ConfigMap's maxCpus, maxGpus, maxMemory
_VALUES_CEILINGS = {"cpus": "maxCpus", "gpus": "maxGpus", "memory": "maxMemory"}


class PolicyError(ValueError):
    """A policy that cannot be read: names the key and what it takes."""


@dataclass(frozen=True)
class Policy:
    """The allowed lists (``"*"``: anything the CRD admits) and the ceilings (None: none)."""

    priority_classes: tuple[str, ...] = (ANY,)
    toleration_keys: tuple[str, ...] = GPU_TAINTS
    service_accounts: tuple[str, ...] = (DEFAULT_SERVICE_ACCOUNT,)
    volume_sources: tuple[str, ...] = DATA_VOLUME_SOURCES
    max_cpus: int | None = None
    max_gpus: float | None = None
    max_memory: str | None = None

    @classmethod
    def from_values(cls, values: Mapping[str, Any] | None) -> Policy:
        """From the chart values' `policy:` mapping; a key left out keeps the chart's default, as Helm merges."""
        values = dict(values or {})
        known = [*LISTS, "maxResources", "admission"]  # admission: whether the chart renders the API server's half
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise PolicyError(f"policy.{unknown[0]}: unknown key; policy takes {', '.join(known)}")
        data = Policy().to_data()
        for key in LISTS:
            if key in values:
                items = values[key]
                if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
                    raise PolicyError(f"policy.{key}: a list of names, e.g. [{data[key].split(',')[0]}]")
                data[key] = ",".join(items)
        ceilings = values.get("maxResources") or {}
        if not isinstance(ceilings, dict) or set(ceilings) - set(_VALUES_CEILINGS):
            raise PolicyError("policy.maxResources: a mapping of cpus, gpus and memory (each null for no ceiling)")
        for key, data_key in _VALUES_CEILINGS.items():
            value = ceilings.get(key)
            data[data_key] = "" if value is None else str(value)
        return cls.from_data(data)

    @classmethod
    def from_data(cls, data: Mapping[str, str]) -> Policy:
        """From the ConfigMap's data, read as the CEL reads variables.policy: comma lists (a missing key allows
        nothing), ceilings as numbers and a quantity (empty or missing: no ceiling)."""
        out: dict[str, Any] = {}
        for key, attr in LISTS.items():
            out[attr] = tuple(x.strip() for x in str(data.get(key, "")).split(",") if x.strip())
        raw = {key: str(data.get(key, "")).strip() for key in CEILINGS}
        try:
            out["max_cpus"] = int(raw["maxCpus"]) if raw["maxCpus"] else None
            out["max_gpus"] = float(raw["maxGpus"]) if raw["maxGpus"] else None
            if raw["maxMemory"]:
                parse_quantity(raw["maxMemory"])
            out["max_memory"] = raw["maxMemory"] or None
        except ValueError as exc:
            raise PolicyError(f"policy ceilings: {exc}: maxCpus is a whole number, maxGpus a number, maxMemory a "
                              "quantity such as 256Gi") from None  # fmt: skip
        return cls(**out)

    def to_data(self) -> dict[str, str]:
        """The ConfigMap's data for this policy (what the chart renders from the same values)."""
        data = {key: ",".join(getattr(self, attr)) for key, attr in LISTS.items()}
        for key, attr in CEILINGS.items():
            value = getattr(self, attr)
            data[key] = "" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))
        return data


def read_policy_dir(path: str | Path) -> Policy:
    """The policy from a mounted ConfigMap: one file per key (the kubelet swaps them atomically)."""
    directory = Path(path)
    if not directory.is_dir():
        raise PolicyError(f"{directory}: no such directory (the policy ConfigMap's mount, TABJOB_POLICY_DIR)")
    keys = [*LISTS, *CEILINGS]
    return Policy.from_data({k: (directory / k).read_text() for k in keys if (directory / k).is_file()})


def _listed(allowed: tuple[str, ...], any_means: str) -> str:
    if not allowed:
        return "none (the platform team lists them in the chart's policy values)"
    return ", ".join(any_means if a == ANY else a for a in allowed)


def _dig(node: Any, *keys: str) -> Any:
    for key in keys:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def check_policy(spec: Mapping[str, Any], policy: Policy) -> list[tuple[str, str]]:
    """Every way ``spec`` (camelCase, as stored) asks for more than ``policy`` allows, as (field path, message)
    pairs; the same verdicts as the ValidatingAdmissionPolicy's CEL."""
    problems: list[tuple[str, str]] = []
    priority = _dig(spec, "scheduling", "priorityClassName") or ""
    allowed = policy.priority_classes
    if priority and priority not in allowed and not (ANY in allowed and not priority.startswith(SYSTEM_PREFIX)):
        problems.append(("spec.scheduling.priorityClassName", f"{priority} is not allowed; this cluster allows "
                         f"{_listed(allowed, 'any but system-*')}"))  # fmt: skip
    keys = policy.toleration_keys
    for i, toleration in enumerate(_dig(spec, "scheduling", "tolerations") or []):
        key = (toleration or {}).get("key") or ""
        if ANY in keys or (key and key in keys):
            continue
        what = f"tolerating {key}" if key else "a toleration without a key (it tolerates every taint)"
        problems.append((f"spec.scheduling.tolerations[{i}].key", f"{what} is not allowed; this cluster allows "
                         f"tolerating {_listed(keys, 'any taint')}"))  # fmt: skip
    account = spec.get("serviceAccountName") or DEFAULT_SERVICE_ACCOUNT
    if ANY not in policy.service_accounts and account not in policy.service_accounts:
        problems.append(("spec.serviceAccountName", f"{account} is not allowed; this cluster allows "
                         f"{_listed(policy.service_accounts, 'any')}"))  # fmt: skip
    for role in ("data", "output"):
        volume = _dig(spec, role, "volume") or {}
        for kind in volume:
            if ANY not in policy.volume_sources and kind not in policy.volume_sources:
                problems.append((f"spec.{role}.volume.{kind}", f"{kind} volumes are not allowed; this cluster allows "
                                 f"{_listed(policy.volume_sources, 'any')}"))  # fmt: skip
    problems += _ceilings(spec.get("resources") or {}, policy)
    return problems


def _ceilings(resources: Mapping[str, Any], policy: Policy) -> list[tuple[str, str]]:
    out = []
    cpus, gpus, memory = resources.get("cpus", 1), resources.get("gpus", 0), resources.get("memory")
    if policy.max_cpus is not None and cpus > policy.max_cpus:
        out.append(("spec.resources.cpus", f"{cpus} CPUs is over this cluster's ceiling of {policy.max_cpus} a job"))
    if policy.max_gpus is not None and gpus > policy.max_gpus:
        out.append(
            ("spec.resources.gpus", f"{gpus:g} GPUs is over this cluster's ceiling of {policy.max_gpus:g} a job")
        )
    if policy.max_memory is not None and memory and parse_quantity(memory) > parse_quantity(policy.max_memory):
        out.append(("spec.resources.memory", f"{memory} is over this cluster's ceiling of {policy.max_memory} a job"))
    return out
