"""What a platform allows TabularJobs to ask of its nodes: volume sources, priority classes, toleration keys.

The CRD admits the default volume sources (api.DATA_VOLUME_SOURCES / OUTPUT_VOLUME_SOURCES) and any well-formed
toleration or priority class; a platform narrows that through the operator's Policy (a chart value), checked
before anything is created. ``check_policy`` is pure: the reconciler calls it beside the planner and reports what
it returns as the job's Stalled reason.

Defaults: the default volume sources; any priority class but Kubernetes' system ones; tolerations of the GPU
taints only. A user who may create TabularJobs but not pods must not gain ``system-node-critical``, a host mount,
or a toleration of every taint through one. ``"*"`` allows anything the CRD admits, except that system priority
classes must be named to be allowed.
"""

from __future__ import annotations

from dataclasses import dataclass

from tabjob.api import TabularJobSpec
from tabjob.volumes import DATA_VOLUME_SOURCES, OUTPUT_VOLUME_SOURCES, VolumeSource

# Kubernetes' own priority classes: never granted by default (they preempt system pods).
SYSTEM_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")
# Taints GPU node pools commonly carry; tolerating them is what a GPU job needs.
GPU_TAINTS = ("nvidia.com/gpu", "amd.com/gpu")


@dataclass(frozen=True)
class Policy:
    """The allowed lists; ``"*"`` in a list allows anything the CRD admits (system priority classes excepted)."""

    volume_sources: tuple[str, ...] = DATA_VOLUME_SOURCES
    priority_classes: tuple[str, ...] = ("*",)
    toleration_keys: tuple[str, ...] = GPU_TAINTS

    @classmethod
    def from_lists(
        cls,
        volume_sources: list[str] | None = None,
        priority_classes: list[str] | None = None,
        toleration_keys: list[str] | None = None,
    ) -> Policy:
        """From the chart's values (comma lists split by the caller); None keeps the default."""
        return cls(
            volume_sources=tuple(volume_sources) if volume_sources is not None else DATA_VOLUME_SOURCES,
            priority_classes=tuple(priority_classes) if priority_classes is not None else ("*",),
            toleration_keys=tuple(toleration_keys) if toleration_keys is not None else GPU_TAINTS,
        )


def _allows(allowed: tuple[str, ...], value: str) -> bool:
    return value in allowed or ("*" in allowed and value not in SYSTEM_PRIORITY_CLASSES)


def _listed(allowed: tuple[str, ...]) -> str:
    return ", ".join(allowed) if allowed else "none (ask your platform team to allow one in the operator's policy)"


def check_policy(spec: TabularJobSpec, policy: Policy) -> list[tuple[str, str]]:
    """Every way ``spec`` asks for more than ``policy`` allows, as (field path, message) pairs."""
    problems: list[tuple[str, str]] = []
    volumes: list[tuple[str, VolumeSource | None, tuple[str, ...]]] = [
        ("spec.data.volume", spec.data.volume, DATA_VOLUME_SOURCES),
        ("spec.output.volume", spec.output.volume, OUTPUT_VOLUME_SOURCES),
    ]
    for path, volume, admissible in volumes:
        if volume is None:
            continue
        kind = volume.kind()
        allowed = tuple(k for k in admissible if _allows(policy.volume_sources, k))
        if kind not in allowed:
            problems.append(
                (f"{path}.{kind}", f"{kind} volumes are not allowed here; this cluster allows {_listed(allowed)}")
            )
    sched = spec.scheduling
    if sched.priority_class_name and not _allows(policy.priority_classes, sched.priority_class_name):
        problems.append(
            (
                "spec.scheduling.priorityClassName",
                f"priority class {sched.priority_class_name!r} is not allowed; this cluster allows "
                f"{_listed(policy.priority_classes)}",
            )
        )
    for i, toleration in enumerate(sched.tolerations):
        key = toleration.key or ""
        if not key and "*" not in policy.toleration_keys:
            problems.append(
                (
                    f"spec.scheduling.tolerations[{i}].key",
                    "a toleration without a key tolerates every taint; name the taint's key (allowed: "
                    f"{_listed(policy.toleration_keys)})",
                )
            )
        elif key and not _allows(policy.toleration_keys, key):
            problems.append(
                (
                    f"spec.scheduling.tolerations[{i}].key",
                    f"tolerating {key!r} is not allowed; this cluster allows {_listed(policy.toleration_keys)}",
                )
            )
    return problems
