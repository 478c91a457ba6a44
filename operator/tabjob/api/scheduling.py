"""Where the pods may run: nodeSelector, tolerations, priority class and Kueue queue, checked as for a pod.

The API server validates these only when the operator creates the pods, long after the TabularJob was admitted; so
the same rules (apimachinery's name rules, ValidateTolerations) are applied here and written into the CRD.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, JsonValue, field_validator, model_validator

from tabjob.api.base import MAX_INT, MAX_LIST, ApiModel, Int, crd_string
from tabjob.api.k8s_names import (
    DNS1123_SUBDOMAIN_PATTERN,
    LABEL_VALUE_PATTERN,
    QUALIFIED_NAME_MAX,
    QUALIFIED_NAME_PATTERN,
    SUBDOMAIN_MAX,
    dns1123_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)

TOLERATION_RULES: list[JsonValue] = [
    {
        "rule": "has(self.key) && self.key != '' || has(self.operator) && self.operator == 'Exists'",
        "message": "a toleration without a key must use operator: Exists",
        "fieldPath": ".operator",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": "!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''",
        "message": "value must be empty when operator is Exists",
        "fieldPath": ".value",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": "!has(self.tolerationSeconds) || has(self.effect) && self.effect == 'NoExecute'",
        "message": "effect must be NoExecute when tolerationSeconds is set",
        "fieldPath": ".effect",
        "reason": "FieldValueInvalid",
    },
]


def toleration_problems(
    key: str | None, operator: str | None, value: str | None, effect: str | None, seconds: int | None
) -> list[str]:
    """A pod toleration's cross-field rules (ValidateTolerations), the ones TOLERATION_RULES gives the CRD."""
    out = []
    if not key and operator != "Exists":
        out.append("a toleration without a key must use operator: Exists")
    if operator == "Exists" and value:
        out.append("value must be empty when operator is Exists")
    if seconds is not None and effect != "NoExecute":
        out.append("effect must be NoExecute when tolerationSeconds is set")
    return out


class Toleration(ApiModel):
    """A pod toleration, checked as the API server checks a pod's."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": TOLERATION_RULES})

    key: str | None = Field(
        default=None, description="Taint key.", json_schema_extra=crd_string(QUALIFIED_NAME_PATTERN, QUALIFIED_NAME_MAX)
    )
    operator: Literal["Exists", "Equal"] | None = Field(default=None, description="Exists or Equal.")
    value: str | None = Field(
        default=None, description="Taint value.", json_schema_extra=crd_string(LABEL_VALUE_PATTERN, 63)
    )
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect."
    )
    toleration_seconds: Annotated[Int, Field(ge=-MAX_INT, le=MAX_INT)] | None = Field(
        default=None, description="For NoExecute taints."
    )

    @field_validator("key")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        problem = qualified_name_problem(v) if v else None
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("value")
    @classmethod
    def _value(cls, v: str | None) -> str | None:
        problem = label_value_problem(v) if v else None
        if problem:
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _as_the_api_server(self) -> Toleration:
        problems = toleration_problems(self.key, self.operator, self.value, self.effect, self.toleration_seconds)
        if problems:
            raise ValueError("; ".join(problems))
        return self


class SchedulingSpec(ApiModel):
    """Where the pods may run."""

    node_selector: dict[str, Annotated[str, Field(json_schema_extra=crd_string(LABEL_VALUE_PATTERN, 63))]] = Field(
        default_factory=dict,
        max_length=MAX_LIST,
        description="Pod nodeSelector: label keys and values.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"self.all(k, size(k) <= {QUALIFIED_NAME_MAX} && k.matches(r'{QUALIFIED_NAME_PATTERN}'))",
                    "message": "nodeSelector keys must be label keys: an optional DNS subdomain prefix and '/', "
                    "then at most 63 letters, digits, '-', '_' or '.' (e.g. example.com/gpu)",
                    "reason": "FieldValueInvalid",
                }
            ]
        },
    )
    tolerations: list[Toleration] = Field(default_factory=list, max_length=MAX_LIST, description="Pod tolerations.")
    priority_class_name: str | None = Field(
        default=None,
        description="Pod priorityClassName (a DNS-1123 subdomain); empty: none.",
        json_schema_extra=crd_string(f"^({DNS1123_SUBDOMAIN_PATTERN[1:-1]})?$", SUBDOMAIN_MAX),
    )
    queue_name: str | None = Field(
        default=None,
        description="Kueue LocalQueue (a DNS-1123 subdomain of at most 63 characters, as it is also a label value);"
        " the pods become one Kueue pod group. Empty: none.",
        json_schema_extra=crd_string(f"^({DNS1123_SUBDOMAIN_PATTERN[1:-1]})?$", 63),
    )

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        problems = [p for k, val in v.items() for p in (qualified_name_problem(k), label_value_problem(val)) if p]
        if problems:
            raise ValueError("; ".join(problems))
        return v

    @field_validator("priority_class_name")
    @classmethod
    def _priority_class(cls, v: str | None) -> str | None:
        problem = dns1123_subdomain_problem(v) if v else None
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("queue_name")
    @classmethod
    def _queue(cls, v: str | None) -> str | None:
        problem = (dns1123_subdomain_problem(v) or label_value_problem(v)) if v else None
        if problem:
            raise ValueError(f"{problem} (a Kueue LocalQueue name is also a label value: at most 63 characters)")
        return v
