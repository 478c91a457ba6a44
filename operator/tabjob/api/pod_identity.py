"""Who the trainer pods run as and what they are told: the ServiceAccount, and the environment a job adds.

The names tabjob sets in every trainer pod are declared once, with who reads each, in ``contracts/pod.py``: the
builders (controller/policy/builders.py `_pod_env`) emit exactly ``POD_ENV`` and ``POD_FIELD_ENV``, in this order,
and the spec refuses them (and every name under ``RESERVED_PREFIXES``) in ``spec.env``, in `tabjob validate`, in
the CRD's CEL and so in the operator, which plans only what the API model admits. A job's own variables would
otherwise silently change the rendezvous, the ranks' thread pools or where the trainer writes.

``envFrom`` keys are unknown until the kubelet reads the Secret or ConfigMap, and the operator never reads Secrets:
a key that collides with one of tabjob's names is overridden by the pod's ``env`` entry of that name, since
Kubernetes gives ``env`` precedence over ``envFrom``. Only a prefix that makes every key reserved is refused.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ConfigDict, Field, JsonValue, field_validator, model_validator

from tabjob.api.base import ApiModel, crd_string
from tabjob.api.k8s_names import DNS1123_SUBDOMAIN_PATTERN, SUBDOMAIN_MAX, dns1123_subdomain_problem
from tabjob.contracts import pod

# What every trainer pod gets from the operator (contracts/pod.py declares each and who reads it), in the order
# `_pod_env` writes it: the Kubeflow training operator's rendezvous variables (code written for PyTorchJob runs
# unchanged), torchrun's own (PET_*), the ranks' thread pools, and the trainer's TABJOB_* settings.
POD_ENV = tuple(v.name for v in pod.POD_ENV)
# From the downward API, after the values above.
POD_FIELD_ENV = {v.name: v.field_path for v in pod.FIELD_ENV if v.field_path}
# Set by torchrun in each worker process over whatever the pod says, so a pod's value could only mislead.
TORCHRUN_ENV = tuple(v.name for v in pod.TORCHRUN_ENV)
# The plan assigns each rank its GPUs; these would remap or widen them (with the NVIDIA runtime's envvar strategy,
# NVIDIA_VISIBLE_DEVICES=all reaches every GPU of the node, whatever the pod requested).
DEVICE_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
# torchrun reads PET_* as its arguments and writes TORCHELASTIC_*; tabjob's trainer reads TABJOB_*.
RESERVED_PREFIXES = ("PET_", "TABJOB_", "TORCHELASTIC_")
RESERVED_ENV = tuple(
    n for n in (*POD_ENV, *POD_FIELD_ENV, *TORCHRUN_ENV, *DEVICE_ENV) if not n.startswith(RESERVED_PREFIXES)
)

# A C identifier with '-' and '.', as every Kubernetes release accepts (1.34 relaxed it to any printable ASCII).
ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
ENV_NAME_MAX = 256
CONFIG_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"  # a ConfigMap or Secret key
ENV_SOURCE_REFUSED = (
    "valueFrom takes secretKeyRef or configMapKeyRef only: tabjob sets POD_IP and POD_NAME itself, and each "
    "rank's resources come from the plan"
)


_RESERVED_WHY = (
    "is set by tabjob itself (the torchrun rendezvous, the threads and devices of the ranks, or the settings of the "
    f"trainer); names {', '.join(p + '*' for p in RESERVED_PREFIXES)} and {', '.join(RESERVED_ENV)} are reserved: "
    "choose another name"
)


def reserved_env_problem(name: str) -> str | None:
    """Why ``name`` may not be set by a job, or None; the same test as ENV_NAME_RULE."""
    if name in RESERVED_ENV or name.startswith(RESERVED_PREFIXES):
        return f"{name} {_RESERVED_WHY}"
    return None


def _cel_strings(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


_NOT_RESERVED = f"!(self.name in {_cel_strings(RESERVED_ENV)})" + "".join(
    f" && !self.name.startsWith('{p}')" for p in RESERVED_PREFIXES
)
ENV_NAME_RULE: dict[str, Any] = {
    "rule": _NOT_RESERVED,
    "messageExpression": f"self.name + ' {_RESERVED_WHY}'",
    "fieldPath": ".name",
    "reason": "FieldValueForbidden",
}
PREFIX_RULE: dict[str, Any] = {
    "rule": "!has(self.prefix) || " + " && ".join(f"!self.prefix.startsWith('{p}')" for p in RESERVED_PREFIXES),
    "message": f"a prefix under {', '.join(p + '*' for p in RESERVED_PREFIXES)} would name every variable "
    "of the source as one tabjob reserves; choose another prefix",
    "fieldPath": ".prefix",
    "reason": "FieldValueForbidden",
}


def _one_of(fields: tuple[str, str], what: str) -> dict[str, Any]:
    a, b = fields
    return {
        "rule": f"has(self.{a}) != has(self.{b})",
        "message": f"set exactly one of {a} or {b} ({what})",
        "reason": "FieldValueInvalid",
    }


def _object_name() -> dict[str, Any]:
    return crd_string(DNS1123_SUBDOMAIN_PATTERN, SUBDOMAIN_MAX)


def _name(kind: str) -> Any:
    return Field(description=f"The {kind}'s name, in the job's namespace.", json_schema_extra=_object_name())


class _NamedObject(ApiModel):
    name: str
    optional: bool | None = Field(default=None, description="Start the pods even when it is missing.")

    @field_validator("name")
    @classmethod
    def _subdomain(cls, v: str) -> str:
        problem = dns1123_subdomain_problem(v)
        if problem:
            raise ValueError(problem)
        return v


class _KeySelector(_NamedObject):
    key: str = Field(
        max_length=SUBDOMAIN_MAX, pattern=CONFIG_KEY_PATTERN, description="The key whose value the variable takes."
    )


class SecretKeySelector(_KeySelector):
    """One key of a Secret in the job's namespace (read by the kubelet; the operator never reads Secrets)."""

    name: str = _name("Secret")


class ConfigMapKeySelector(_KeySelector):
    """One key of a ConfigMap in the job's namespace."""

    name: str = _name("ConfigMap")


class EnvVarSource(ApiModel):
    """Where a variable's value comes from: a Secret's key or a ConfigMap's key."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_one_of(("secretKeyRef", "configMapKeyRef"), "valueFrom")]}
    )

    secret_key_ref: SecretKeySelector | None = Field(default=None, description="A key of a Secret.")
    config_map_key_ref: ConfigMapKeySelector | None = Field(default=None, description="A key of a ConfigMap.")

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvVarSource:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError("set exactly one of secretKeyRef or configMapKeyRef")
        return self


class EnvVar(ApiModel):
    """A variable in every trainer pod: a value, or a Secret's or ConfigMap's key."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                ENV_NAME_RULE,
                {
                    "rule": "!(has(self.value) && has(self.valueFrom))",
                    "message": "set value or valueFrom, not both",
                    "fieldPath": ".valueFrom",
                    "reason": "FieldValueInvalid",
                },
            ]
        }
    )

    name: str = Field(
        description="The variable's name; tabjob's own (MASTER_ADDR, RANK, OMP_NUM_THREADS, PET_*, TABJOB_*, ...) "
        "are refused.",
        json_schema_extra=crd_string(ENV_NAME_PATTERN, ENV_NAME_MAX),
    )
    value: str | None = Field(
        default=None,
        max_length=32768,
        description="A plain value, kept in the TabularJob (use valueFrom.secretKeyRef for credentials). $(NAME) "
        "expands an earlier variable, tabjob's included.",
    )
    value_from: EnvVarSource | None = Field(default=None, description="A Secret's or ConfigMap's key.")

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, v: str) -> str:
        if not re.fullmatch(ENV_NAME_PATTERN, v) or len(v) > ENV_NAME_MAX:
            raise ValueError(
                f"{v[:60]!r} is not an environment variable name: letters, digits, '_', '-' and '.', not starting "
                f"with a digit, at most {ENV_NAME_MAX} characters (e.g. AWS_REGION)"
            )
        problem = reserved_env_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _one_value(self) -> EnvVar:
        if self.value is not None and self.value_from is not None:
            raise ValueError("set value or valueFrom, not both")
        return self


class SecretEnvSource(_NamedObject):
    """Every key of a Secret becomes a variable (read by the kubelet; the operator never reads Secrets)."""

    name: str = _name("Secret")


class ConfigMapEnvSource(_NamedObject):
    """Every key of a ConfigMap becomes a variable."""

    name: str = _name("ConfigMap")


class EnvFromSource(ApiModel):
    """All keys of a Secret or ConfigMap as variables, optionally prefixed."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_one_of(("secretRef", "configMapRef"), "envFrom"), PREFIX_RULE]}
    )

    prefix: str | None = Field(
        default=None,
        max_length=ENV_NAME_MAX,
        pattern=ENV_NAME_PATTERN,
        description="Put before every key's name; a prefix under PET_, TABJOB_ or TORCHELASTIC_ is refused.",
    )
    secret_ref: SecretEnvSource | None = Field(default=None, description="A Secret in the job's namespace.")
    config_map_ref: ConfigMapEnvSource | None = Field(default=None, description="A ConfigMap in the job's namespace.")

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str | None) -> str | None:
        if v is not None and v.startswith(RESERVED_PREFIXES):
            raise ValueError(str(PREFIX_RULE["message"]))
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvFromSource:
        if (self.secret_ref is None) == (self.config_map_ref is None):
            raise ValueError("set exactly one of secretRef or configMapRef")
        return self


# The env list is a map keyed by name, as the API server keeps it (duplicates refused, server-side apply merges).
ENV_LIST: dict[str, JsonValue] = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
SERVICE_ACCOUNT_DESCRIPTION = (
    "ServiceAccount every trainer pod runs as, in the job's namespace (default: the namespace's `default`); the "
    "cluster's policy lists the ones jobs may use. Its API token is mounted only with "
    "automountServiceAccountToken: true; cloud identities bound to it (EKS IRSA's projected token, GKE Workload "
    "Identity's metadata server) reach the pods either way."
)
