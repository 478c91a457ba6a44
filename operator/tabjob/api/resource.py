"""The TabularJob resource as a whole: metadata checked as the API server checks it, spec and status."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)

from tabjob.api.base import (
    ApiModel,
)
from tabjob.api.identity import MAX_NAME
from tabjob.api.k8s_names import (
    dns1035_label_problem,
    dns1123_label_problem,
    label_value_problem,
    qualified_name_problem,
)
from tabjob.api.spec import TabularJobSpec
from tabjob.api.status import TabularJobStatus


class ObjectMeta(BaseModel):
    """The parts of metadata tabjob reads, checked as the API server checks them; the rest passes through."""

    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(
        description=f"The job's name: a DNS-1035 label of at most {MAX_NAME} characters (it names the Service "
        "and the pods)."
    )
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        problem = dns1035_label_problem(v, MAX_NAME)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str | None) -> str | None:
        problem = dns1123_label_problem(v) if v is not None else None
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        problems = [
            p for k, val in (v or {}).items() for p in (qualified_name_problem(k), label_value_problem(val)) if p
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return v

    @field_validator("annotations")
    @classmethod
    def _annotations(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        problems = [p for k in (v or {}) for p in [qualified_name_problem(k)] if p]
        size = sum(len(k) + len(val) for k, val in (v or {}).items())
        if size > 256 * 1024:
            problems.append(f"annotations hold {size} bytes; the API server allows 262144")
        if problems:
            raise ValueError("; ".join(problems))
        return v


class TabularJob(ApiModel):
    """The TabularJob resource."""

    api_version: Literal["tabjob.dev/v1alpha1"] = Field(
        default="tabjob.dev/v1alpha1", description="tabjob.dev/v1alpha1"
    )
    kind: Literal["TabularJob"] = Field(default="TabularJob", description="TabularJob")
    metadata: ObjectMeta = Field(description="Standard object metadata.")
    spec: TabularJobSpec = Field(description="The run and its resources.")
    status: TabularJobStatus | None = Field(default=None, description="Observed state.")
