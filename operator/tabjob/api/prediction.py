"""The TabularPrediction resource: a dataset in object storage scored by a finished run, sharded over pods.

Its own kind (short name ``tp``) beside the TabularJob rather than a field of it: a prediction has its own lifetime
(one run scores many datasets, each on its own schedule, long after the job finished), its own inputs and output,
its own status (rows, rate, shards) and its own pods, and it refers to a run the way a Deployment refers to a
ConfigMap. Its spec cannot change once created (the CRD's CEL says so): a different scoring is another object.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from tabjob.api.base import MAX_CPUS, MAX_LIST, MAX_MEMORY, MAX_SECONDS, QUANTITY_PATTERN, ApiModel, Int, crd_string
from tabjob.api.base import parse_quantity as _parse_quantity
from tabjob.api.identity import MAX_NAME, MAX_PODS
from tabjob.api.k8s_names import (
    DNS1035_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_PATTERN,
    QUALIFIED_NAME_MAX,
    SUBDOMAIN_MAX,
    dns1035_label_problem,
    dns1123_subdomain_problem,
)
from tabjob.api.pod_identity import ENV_LIST, SERVICE_ACCOUNT_DESCRIPTION, EnvFromSource, EnvVar
from tabjob.api.resource import ObjectMeta
from tabjob.api.scheduling import SchedulingSpec
from tabjob.api.spec import OUTPUT_URI_PATTERN
from tabjob.api.status import Condition

PREDICTION_KIND = "TabularPrediction"
PREDICTION_PLURAL = "tabularpredictions"
PREDICTION_SINGULAR = "tabularprediction"
PREDICTION_SHORT_NAMES = ["tp"]
# On a prediction's pods, beside tabjob.dev/job-name (which the operator's watches select on): whose pods they are.
LABEL_PREDICTION = "tabjob.dev/prediction-name"
LABEL_INDEX = "tabjob.dev/index"  # the pod's share of the shards, 0..parallelism-1
MAX_GPUS_PER_POD = 8


def _object_uri(v: str | None, what: str) -> str | None:
    if v is not None and not re.match(OUTPUT_URI_PATTERN, v):
        raise ValueError(
            f"{v!r} is not an object storage URI: write s3://BUCKET/PREFIX/ or gs://BUCKET/PREFIX/ ({what}; a bucket "
            "name of 3-63 lowercase letters, digits, dots and hyphens)"
        )
    return v


class ModelRef(ApiModel):
    """Which finished run scores: a TabularJob of this namespace (whose run is in object storage), or a run's URI."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.job) != has(self.uri)",
                    "message": "set exactly one of job (a TabularJob in this namespace) or uri (a run's s3:// or "
                    "gs:// URI)",
                    "reason": "FieldValueInvalid",
                }
            ]
        }
    )

    job: str | None = Field(
        default=None,
        description="A Succeeded TabularJob in this namespace with spec.output.uri: its committed run scores.",
        json_schema_extra=crd_string(DNS1035_LABEL_PATTERN, MAX_NAME),
    )
    uri: str | None = Field(
        default=None,
        description="A committed run's URI (a TabularJob's spec.output.uri, with its _COMMITTED.json).",
        json_schema_extra=crd_string(OUTPUT_URI_PATTERN, 2048),
    )
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="A leaderboard model instead of the run's best (as tabjob predict --model).",
    )

    @field_validator("job")
    @classmethod
    def _job(cls, v: str | None) -> str | None:
        problem = dns1035_label_problem(v, MAX_NAME) if v is not None else None
        if problem:
            raise ValueError(f"{problem} (a TabularJob's name)")
        return v

    @field_validator("uri")
    @classmethod
    def _uri(cls, v: str | None) -> str | None:
        return _object_uri(v, "a committed run")

    @model_validator(mode="after")
    def _one(self) -> ModelRef:
        if (self.job is None) == (self.uri is None):
            raise ValueError(
                "set exactly one of job (a TabularJob in this namespace) or uri (a run's s3:// or gs:// URI)"
            )
        return self


class PredictionOutput(ApiModel):
    """Where the part files go."""

    uri: str = Field(
        description="An s3:// or gs:// prefix: part-NNNNN.parquet per shard, then _SUCCESS (docs/scoring.md).",
        json_schema_extra=crd_string(OUTPUT_URI_PATTERN, 2048),
    )
    overwrite: bool = Field(
        default=False,
        description="Replace a finished result (or another prediction's parts) already at uri; false refuses it.",
    )

    @field_validator("uri")
    @classmethod
    def _uri(cls, v: str) -> str:
        _object_uri(v, "the output prefix")
        return v


class PredictionResources(ApiModel):
    """What each scoring pod requests (and is limited to)."""

    cpus: Int = Field(default=1, ge=1, le=MAX_CPUS, description="CPUs per pod (whole number).")
    memory: str | None = Field(
        default=None,
        description="Memory per pod as a Kubernetes quantity (4Gi): a pod holds one shard at a time (at most a "
        "million rows) and the model.",
        json_schema_extra=crd_string(QUANTITY_PATTERN, 64),
    )
    gpus: Int = Field(default=0, ge=0, le=MAX_GPUS_PER_POD, description="Whole GPUs per pod, for network models.")
    gpu_resource: str = Field(
        default="nvidia.com/gpu",
        min_length=1,
        max_length=QUALIFIED_NAME_MAX,
        pattern=r"^[a-z0-9.-]+/[A-Za-z0-9._-]+$",
        description="Extended resource the GPU limit uses.",
    )

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: str | None) -> str | None:
        if v is not None and not 2**20 <= _parse_quantity(v) <= MAX_MEMORY:
            raise ValueError(f"{v} is outside 1Mi..1Pi")
        return v


class PredictionRunPolicy(ApiModel):
    backoff_limit: Int = Field(default=3, ge=0, le=100, description="Pod failures (crashes) retried in all.")
    active_deadline_seconds: Annotated[Int, Field(ge=1, le=MAX_SECONDS)] | None = Field(
        default=None, description="Fail (DeadlineExceeded) after this many seconds from the first pod."
    )
    ttl_seconds_after_finished: Annotated[Int, Field(ge=0, le=MAX_SECONDS)] | None = Field(
        default=None, description="Delete the prediction this many seconds after it finished."
    )


class TabularPredictionSpec(ApiModel):
    """A dataset scored by a finished run into Parquet part files."""

    model: ModelRef = Field(description="The finished run that scores: {job: NAME} or {uri: s3://...}.")
    data: str = Field(
        description="The dataset: an s3:// or gs:// prefix (or file) of Parquet or CSV files, read as tabjob reads "
        "training data (docs/storage.md); its files and row groups become the shards.",
        json_schema_extra=crd_string(OUTPUT_URI_PATTERN, 4096),
    )
    output: PredictionOutput = Field(description="The prefix the part files and _SUCCESS are written to.")
    passthrough_columns: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Columns of the data copied into the output beside prediction and proba_<class> (an id, a key).",
    )
    parallelism: Int = Field(default=1, ge=1, le=MAX_PODS, description="Scoring pods; each takes its share of shards.")
    resources: PredictionResources = Field(default_factory=PredictionResources, description="Per pod.")
    scheduling: SchedulingSpec = Field(
        default_factory=SchedulingSpec, description="Pod placement; queueName admits the pods as one Kueue group."
    )
    image: str | None = Field(
        default=None,
        description="Trainer image; default from the operator's settings.",
        json_schema_extra=crd_string(r"^\S+$", 1024),
    )
    run_policy: PredictionRunPolicy = Field(default_factory=PredictionRunPolicy, description="Retries, clean-up.")
    service_account_name: str | None = Field(
        default=None,
        description=SERVICE_ACCOUNT_DESCRIPTION,
        json_schema_extra=crd_string(DNS1123_SUBDOMAIN_PATTERN, SUBDOMAIN_MAX),
    )
    automount_service_account_token: bool = Field(default=False, description="Mount the account's API token.")
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Variables for every scoring pod (AWS_REGION, ...): a value, or valueFrom a Secret's or "
        "ConfigMap's key; tabjob's own names are refused.",
        json_schema_extra=ENV_LIST,
    )
    env_from: list[EnvFromSource] = Field(
        default_factory=list,
        max_length=16,
        description="Every key of a Secret or ConfigMap as a variable (the store's credentials).",
    )

    @field_validator("data")
    @classmethod
    def _data(cls, v: str) -> str:
        _object_uri(v, "the dataset")
        return v

    @field_validator("service_account_name")
    @classmethod
    def _service_account(cls, v: str | None) -> str | None:
        problem = dns1123_subdomain_problem(v) if v is not None else None
        if problem:
            raise ValueError(f"{problem} (a ServiceAccount's name)")
        return v

    @field_validator("passthrough_columns")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        twice = sorted({c for c in v if v.count(c) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed twice; list each column once")
        return v


class PodProgress(ApiModel):
    """One scoring pod's share, as it last reported it."""

    index: int = Field(description="The pod's index (its share of the shards).")
    pod: str = Field(default="", description="The current pod's name.")
    state: str = Field(default="Pending", description="Pending, Running, Succeeded or Failed.")
    shards_done: int = Field(default=0, description="Its shards committed (skipped ones included).")
    shards_total: int = Field(default=0, description="Its shards.")
    rows_done: int = Field(default=0, description="Rows of its committed shards.")
    rows_scored: int = Field(default=0, description="Rows its current pod scored itself (the rate's part).")
    seconds_scoring: float = Field(default=0, description="Seconds its current pod has been scoring.")


class ShardError(ApiModel):
    shard: int = Field(description="The shard (part-NNNNN) that failed.")
    error: str = Field(description="The first row and column its values failed on.")


class TabularPredictionStatus(ApiModel):
    """Observed state, written by the operator from the pods' reports (it never reads the bucket)."""

    model_config = ConfigDict(extra="ignore")

    phase: Literal["Pending", "Running", "Succeeded", "Failed"] | None = Field(default=None, description="Phase.")
    observed_generation: int | None = Field(default=None, description="Spec generation last reconciled.")
    conditions: list[Condition] = Field(default_factory=list, description="kstatus conditions.")
    model_uri: str | None = Field(default=None, description="The run that scores.")
    output_uri: str | None = Field(default=None, description="Where the parts and _SUCCESS are.")
    rows_scored: int = Field(default=0, description="Rows in committed parts.")
    rows_total: int | None = Field(default=None, description="Rows in the dataset (unknown for CSV until read).")
    rows_per_second: float | None = Field(default=None, description="Rows scored per second, all pods.")
    eta_seconds: int | None = Field(default=None, description="Seconds left at the current rate.")
    shards_done: int = Field(default=0, description="Shards committed.")
    shards_total: int = Field(default=0, description="Shards in the plan.")
    shards_failed: int = Field(default=0, description="Shards whose rows the model could not take.")
    failed_shards: list[ShardError] = Field(default_factory=list, description="The first shard errors.")
    pods: list[PodProgress] = Field(default_factory=list, description="Each pod's share.")
    progress: str = Field(default="", description="rowsScored/rowsTotal, for kubectl get.")
    created: list[int] = Field(default_factory=list, description="Pods created per index (its retries + 1).")
    restarts: int = Field(default=0, description="Pods replaced (failed, lost or evicted).")
    failures: int = Field(default=0, description="Pods that failed (counted against backoffLimit).")
    last_failure: str | None = Field(default=None, description="What ended the last replaced pod.")
    message: str = Field(default="", description="Latest human-readable message.")
    start_time: str | None = Field(default=None, description="When the first pod was created (RFC 3339).")
    completion_time: str | None = Field(default=None, description="When it finished (RFC 3339).")


class TabularPrediction(ApiModel):
    """The TabularPrediction resource."""

    api_version: Literal["tabjob.dev/v1alpha1"] = Field(
        default="tabjob.dev/v1alpha1", description="tabjob.dev/v1alpha1"
    )
    kind: Literal["TabularPrediction"] = Field(default="TabularPrediction", description="TabularPrediction")
    metadata: ObjectMeta = Field(description="Standard object metadata.")
    spec: TabularPredictionSpec = Field(description="What to score, with what, and where to.")
    status: TabularPredictionStatus | None = Field(default=None, description="Observed state.")
