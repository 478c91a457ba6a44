"""The TabularJob API: pydantic models of spec and status, the single source of the CRD.

Python attributes are snake_case; the wire format (YAML, the CRD) is camelCase through aliases.
Unknown fields are errors everywhere (``extra="forbid"``) so a typo such as ``bagginng`` is caught,
except inside free-form maps (hyperparameters, volume sources) that Kubernetes or the model owns.
Cross-field checks that need arithmetic over several levels live in the planner; the ones an API
server can evaluate itself are also written as CEL rules (``x-kubernetes-validations``) here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from tabjob.errors import SpecError, field_path

GROUP = "tabjob.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TabularJob"
PLURAL = "tabularjobs"
SINGULAR = "tabularjob"
SHORT_NAMES = ["tj", "tabjob"]

MODEL_KEYS = ("GBM", "NN_TORCH")
METRICS = ("auto", "accuracy", "balanced_accuracy", "roc_auc", "log_loss", "f1", "rmse", "mae", "r2")
_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m|e[0-9]+)?$")
_MODEL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,62}$")

# A GPU request is either whole or an exact fraction 1/k of one GPU (0.5, 0.25, 1/3, ...).
GPU_FRACTION_RULE: dict[str, Any] = {
    "rule": "!has(self.gpus) || self.gpus == double(int(self.gpus)) || (self.gpus < 1.0 && "
    "(1.0 / self.gpus) - double(int(1.0 / self.gpus + 0.5)) < 0.000001 && "
    "(1.0 / self.gpus) - double(int(1.0 / self.gpus + 0.5)) > -0.000001)",
    "message": "gpus must be a whole number or a fraction that divides one GPU (0.5, 0.25, 1/3, ...)",
    "fieldPath": ".gpus",
    "reason": "FieldValueInvalid",
}


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_default=True,
    )


def is_valid_gpu_amount(value: float) -> bool:
    """Whole GPUs, or a fraction 1/k that packs exactly onto one GPU."""
    if value < 0:
        return False
    if abs(value - round(value)) < 1e-9:
        return True
    if value > 1:
        return False
    k = 1.0 / value
    return abs(k - round(k)) < 1e-6


def parse_quantity(value: str) -> float:
    """A Kubernetes quantity (``64Gi``, ``500M``, ``1.5G``) in base units (bytes for memory)."""
    m = _QUANTITY.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a Kubernetes quantity such as 64Gi, 512Mi or 2G")
    number = float(m.group(1))
    suffix = m.group(3) or ""
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    decimal = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "m": 1e-3, "": 1.0}
    if suffix in binary:
        return number * binary[suffix]
    if suffix.startswith("e"):
        return number * 10 ** int(suffix[1:])
    return number * decimal[suffix]


# ---------------------------------------------------------------------------------------------- spec


class DataSpec(_Model):
    """Where the training data lives and what to predict."""

    train: str = Field(
        min_length=1,
        description="Training table, CSV or Parquet: a path inside the data volume (mounted read-only at "
        "/data), an fsspec URI (s3://, gs://, file://), or a built-in dataset (sklearn://breast_cancer).",
    )
    test: str | None = Field(
        default=None, description="Optional test table in the same form; adds score_test to the leaderboard."
    )
    label: str = Field(min_length=1, description="Name of the column to predict.")
    problem_type: Literal["auto", "binary", "multiclass", "regression"] = Field(
        default="auto", description="auto infers binary, multiclass or regression from the label column."
    )
    eval_metric: Literal[METRICS] = Field(  # type: ignore[valid-type]
        default="auto",
        description="Metric that ranks models, reported higher-is-better (errors negated, as AutoGluon "
        "does): accuracy, balanced_accuracy, roc_auc, log_loss, f1, rmse, mae, r2; auto picks accuracy for "
        "classification and rmse for regression.",
    )
    volume: dict[str, Any] | None = Field(
        default=None,
        description="Any pod volume source (persistentVolumeClaim, nfs, csi) mounted read-only at /data.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


class OutputSpec(_Model):
    """Where models, leaderboard.json, plan.json, metrics and logs are written."""

    path: str = Field(min_length=1, description="Output directory, e.g. /output/adult.")
    volume: dict[str, Any] | None = Field(
        default=None,
        description="Any pod volume source mounted read-write at /output; without one, results reach the "
        "status through the termination message only.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


class BudgetSpec(_Model):
    """Predictor-level resources (AutoGluon fit(num_cpus, num_gpus)): the whole job's budget."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [GPU_FRACTION_RULE]})

    cpus: int = Field(default=1, ge=1, description="CPUs the whole job may use (whole number, >= 1).")
    gpus: float = Field(default=0, ge=0, description="GPUs the whole job may use; 0 for a CPU-only job.")
    memory: str | None = Field(
        default=None,
        description="Memory for the whole job as a Kubernetes quantity (64Gi); split over the pods by ranks.",
    )
    gpu_resource: str = Field(
        default="nvidia.com/gpu",
        min_length=1,
        pattern=r"^[a-z0-9.-]+/[A-Za-z0-9._-]+$",
        description="Extended resource the pods' GPU limits use: nvidia.com/gpu, amd.com/gpu, "
        "nvidia.com/mig-1g.10gb, nvidia.com/gpu.shared, ...",
    )
    gpus_per_pod: int = Field(default=8, ge=1, description="Largest number of GPUs one pod may hold.")
    cpus_per_pod: int | None = Field(
        default=None,
        ge=1,
        description="CPU-only jobs: largest number of CPUs one pod may hold (default: one pod).",
    )

    @field_validator("memory")
    @classmethod
    def _memory_is_quantity(cls, v: str | None) -> str | None:
        if v is not None:
            parse_quantity(v)
        return v

    @field_validator("gpus")
    @classmethod
    def _gpus_fraction(cls, v: float) -> float:
        if not is_valid_gpu_amount(v):
            raise ValueError("must be a whole number of GPUs or a fraction that divides one GPU (0.5, 0.25)")
        return v


class FitResources(_Model):
    """Resources of one fit (AutoGluon ag_args_fit) or of one bagged model (ag_args_ensemble)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [GPU_FRACTION_RULE]})

    cpus: int | None = Field(default=None, ge=1, description="CPUs (whole number, >= 1); omitted: inherited.")
    gpus: float | None = Field(
        default=None,
        ge=0,
        description="GPUs: a whole number or a fraction that divides one GPU (0.5, 0.25, 1/3); fractional "
        "fits share one physical GPU. Omitted: inherited.",
    )

    @field_validator("gpus")
    @classmethod
    def _gpus_fraction(cls, v: float | None) -> float | None:
        if v is not None and not is_valid_gpu_amount(v):
            raise ValueError("must be a whole number of GPUs or a fraction that divides one GPU (0.5, 0.25)")
        return v


class ModelConfig(_Model):
    """One model configuration (one entry of AutoGluon's hyperparameters list)."""

    name: str | None = Field(
        default=None,
        description="Leaderboard name; default the model key, then KEY_2, KEY_3 for further configs.",
    )
    hyperparameters: dict[str, Any] = Field(
        default_factory=dict,
        description="Model hyperparameters (LightGBM parameters for GBM; MLP settings for NN_TORCH).",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    resources: FitResources | None = Field(
        default=None, description="Resources per fit (per fold when bagged), like AutoGluon's ag_args_fit."
    )
    processes: int = Field(
        default=1,
        ge=1,
        description="More than 1: one fit trained data-parallel (DDP / LightGBM data-parallel) over that "
        "many ranks; its resources are the total over those ranks.",
    )

    @field_validator("name")
    @classmethod
    def _name_shape(cls, v: str | None) -> str | None:
        if v is not None and not _MODEL_NAME.match(v):
            raise ValueError("must start with a letter and hold only letters, digits, '_', '.', '-' (<= 63)")
        return v


class ModelsSpec(_Model):
    """Models to train, in AutoGluon's hyperparameters shape: model key -> list of configs."""

    GBM: list[ModelConfig] | None = Field(default=None, alias="GBM", description="LightGBM configs.")
    NN_TORCH: list[ModelConfig] | None = Field(default=None, alias="NN_TORCH", description="PyTorch MLP configs.")

    def items(self) -> list[tuple[str, list[ModelConfig]]]:
        return [(key, getattr(self, key)) for key in MODEL_KEYS if getattr(self, key)]


class BaggingSpec(_Model):
    """k-fold bagging (AutoGluon num_bag_folds / num_bag_sets / ag_args_ensemble)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.folds == 0 || self.folds >= 2",
                    "message": "folds must be 0 (no bagging) or at least 2",
                    "fieldPath": ".folds",
                    "reason": "FieldValueInvalid",
                }
            ]
        }
    )

    folds: int = Field(default=0, ge=0, le=100, description="Folds per bagged model; 0 turns bagging off.")
    sets: int = Field(default=1, ge=1, le=20, description="Times the k-fold split is repeated (new seed).")
    resources: FitResources | None = Field(
        default=None,
        description="Resources of one bagged model (one trial of one config, all its folds); default: the "
        "job's budget.",
    )

    @model_validator(mode="after")
    def _folds(self) -> BaggingSpec:
        if self.folds == 1:
            raise ValueError("folds must be 0 (no bagging) or at least 2")
        return self


class SearchDimension(_Model):
    """One searched hyperparameter: exactly one of int, uniform, logUniform, choice."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    # `choice` holds values of any type, which CEL cannot see; the rest of the
                    # exactly-one check (choice with a range, or nothing at all) is the planner's.
                    "rule": "[has(self.int), has(self.uniform), has(self.logUniform)].filter(x, x).size() <= 1",
                    "message": "set only one of int, uniform, logUniform, choice",
                }
            ]
        }
    )

    int_: list[int] | None = Field(
        default=None, alias="int", min_length=2, max_length=2, description="[low, high] integers, inclusive."
    )
    uniform: list[float] | None = Field(
        default=None, min_length=2, max_length=2, description="[low, high] floats, uniform."
    )
    log_uniform: list[float] | None = Field(
        default=None, min_length=2, max_length=2, description="[low, high] floats > 0, log-uniform."
    )
    choice: list[Any] | None = Field(
        default=None,
        min_length=1,
        description="Values to choose from.",
        json_schema_extra={"items": {"x-kubernetes-preserve-unknown-fields": True}},
    )

    @model_validator(mode="after")
    def _one_kind(self) -> SearchDimension:
        kinds = [k for k in ("int_", "uniform", "log_uniform", "choice") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("set exactly one of int, uniform, logUniform, choice")
        bounds = getattr(self, kinds[0])
        if kinds[0] != "choice" and bounds[0] > bounds[1]:
            raise ValueError(f"low {bounds[0]} is above high {bounds[1]}")
        if kinds[0] == "log_uniform" and bounds[0] <= 0:
            raise ValueError("logUniform bounds must be > 0")
        return self


class TuningSpec(_Model):
    """Hyperparameter tuning (AutoGluon hyperparameter_tune_kwargs)."""

    searcher: Literal["random"] = Field(default="random", description="Search algorithm: random.")
    scheduler: Literal["local"] = Field(default="local", description="Trial scheduler: local.")
    trials: int = Field(default=1, ge=1, le=1000, description="Trials per model config; 1 turns tuning off.")
    search_space: dict[str, dict[str, SearchDimension]] = Field(
        default_factory=dict,
        description="Model key (GBM, NN_TORCH) or config name -> hyperparameter -> dimension; models "
        "without an entry use tabjob's default space.",
    )


class EnsembleSpec(_Model):
    """Caruana weighted ensemble over out-of-fold or validation predictions."""

    size: int = Field(default=25, ge=0, le=1000, description="Selection rounds; 0 turns the ensemble off.")


class RunPolicy(_Model):
    """Retries, deadlines and clean-up, as in Kubeflow's runPolicy."""

    backoff_limit: int = Field(default=3, ge=0, le=100, description="Retries of the whole torchrun group.")
    active_deadline_seconds: int | None = Field(
        default=None, ge=1, description="Fail the job (DeadlineExceeded) after this many seconds running."
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None, ge=0, description="Delete the job this many seconds after it finished."
    )
    suspend: bool = Field(default=False, description="true deletes the pods and keeps results; false resumes.")


class Toleration(_Model):
    """A pod toleration."""

    key: str | None = Field(default=None, description="Taint key.")
    operator: Literal["Exists", "Equal"] | None = Field(default=None, description="Exists or Equal.")
    value: str | None = Field(default=None, description="Taint value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect."
    )
    toleration_seconds: int | None = Field(default=None, description="For NoExecute taints.")


class SchedulingSpec(_Model):
    """Where the pods may run."""

    node_selector: dict[str, str] = Field(default_factory=dict, description="Pod nodeSelector.")
    tolerations: list[Toleration] = Field(default_factory=list, description="Pod tolerations.")
    priority_class_name: str | None = Field(default=None, description="Pod priorityClassName.")
    queue_name: str | None = Field(default=None, description="Kueue LocalQueue; the pods become one Kueue pod group.")


class TabularJobSpec(_Model):
    """A tabular training run and its resources."""

    data: DataSpec = Field(description="Training data and label.")
    output: OutputSpec = Field(description="Where results are written.")
    resources: BudgetSpec = Field(default_factory=BudgetSpec, description="The job's whole budget.")
    models: ModelsSpec = Field(description="Models to train: GBM (LightGBM) and NN_TORCH (PyTorch MLP).")
    bagging: BaggingSpec = Field(default_factory=BaggingSpec, description="k-fold bagging.")
    tuning: TuningSpec = Field(default_factory=TuningSpec, description="Hyperparameter trials.")
    ensemble: EnsembleSpec = Field(default_factory=EnsembleSpec, description="Weighted ensemble.")
    time_limit_seconds: int | None = Field(
        default=None, ge=1, description="Training time budget; fits that cannot start in time are skipped."
    )
    on_gpu_unavailable: Literal["Fail", "FallbackToCPU"] = Field(
        default="Fail",
        description="What a fit that asked for a GPU does when none works: Fail, or FallbackToCPU (recorded "
        "on the leaderboard; never silent).",
    )
    image: str | None = Field(default=None, description="Trainer image; default from the operator's settings.")
    run_policy: RunPolicy = Field(default_factory=RunPolicy, description="Retries, deadlines, clean-up.")
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec, description="Pod placement.")

    @model_validator(mode="after")
    def _has_models(self) -> TabularJobSpec:
        if not self.models.items():
            raise ValueError("models: name at least one of GBM, NN_TORCH with a list of configs, e.g. GBM: [{}]")
        return self


# -------------------------------------------------------------------------------------------- status


class Condition(_Model):
    """A kstatus-style condition."""

    type: str = Field(description="Ready, Reconciling, Stalled, Running, Succeeded, Failed or Suspended.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(default="", description="CamelCase reason.")
    message: str = Field(default="", description="Human-readable detail.")
    last_transition_time: str | None = Field(default=None, description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(default=None, description="Generation this condition reflects.")


class ResourceAmount(_Model):
    """CPUs and GPUs."""

    cpus: float = Field(default=0, description="CPUs.")
    gpus: float = Field(default=0, description="GPUs.")


class PodSummary(_Model):
    """One planned pod."""

    name: str = Field(description="Pod name.")
    cpus: int = Field(description="CPUs requested.")
    gpus: int = Field(description="Whole GPUs on the GPU resource.")
    memory: str | None = Field(default=None, description="Memory requested.")
    procs: int = Field(description="torchrun processes (ranks) in this pod.")


class Concurrency(_Model):
    """What runs at once at the plan's peak."""

    trials: int = Field(description="Trials in parallel.")
    folds: int = Field(description="Folds in parallel within a trial.")
    fits: int = Field(description="Fits at once (trials x folds).")


class PlanSummary(_Model):
    """The resolved plan as published in status (the full plan, with every fit, is in the ConfigMap)."""

    pods: list[PodSummary] = Field(default_factory=list, description="Planned pods.")
    world_size: int = Field(default=0, description="torchrun processes over all pods.")
    concurrency: Concurrency | None = Field(default=None, description="Parallelism at the peak.")
    peak: ResourceAmount | None = Field(default=None, description="Largest resources in use at once.")
    requested: ResourceAmount | None = Field(default=None, description="What the pods request.")
    fits: int = Field(default=0, description="Number of fits.")
    warnings: list[str] = Field(default_factory=list, description="Planner warnings.")


class ModelStatus(_Model):
    """One leaderboard row."""

    name: str = Field(description="Model name.")
    state: str = Field(default="", description="Succeeded, Failed, Skipped or Running.")
    score_val: float | None = Field(default=None, description="Validation (out-of-fold) score, higher is better.")
    score_test: float | None = Field(default=None, description="Test score, when test data was given.")
    fit_seconds: float | None = Field(default=None, description="Fit time in seconds.")
    gpus: float | None = Field(default=None, description="GPUs per fit.")
    device: str | None = Field(default=None, description="Device the fit ran on (cpu, cuda).")


class Progress(_Model):
    """Progress while running."""

    fits_done: int = Field(default=0, description="Fits finished.")
    fits_total: int = Field(default=0, description="Fits planned.")
    best_score: float | None = Field(default=None, description="Best validation score so far.")
    best_model: str | None = Field(default=None, description="Model holding the best score so far.")
    fits_failed: int = Field(default=0, description="Fits that failed.")
    updated_time: str | None = Field(default=None, description="When progress was last read (RFC 3339).")
    summary: str = Field(default="", description="fitsDone/fitsTotal, for kubectl get.")


class TabularJobStatus(_Model):
    """Observed state, written by the operator."""

    model_config = ConfigDict(extra="ignore")

    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Suspended"] | None = Field(
        default=None, description="Pending, Running, Succeeded, Failed or Suspended."
    )
    observed_generation: int | None = Field(default=None, description="Spec generation last reconciled.")
    conditions: list[Condition] = Field(default_factory=list, description="kstatus conditions and more.")
    plan: PlanSummary | None = Field(default=None, description="The resolved plan.")
    requested_gpus: int | None = Field(default=None, description="Whole GPUs the pods request.")
    progress: Progress | None = Field(default=None, description="Fits done and best score so far.")
    models: list[ModelStatus] = Field(default_factory=list, description="Leaderboard, best first.")
    best_model: str | None = Field(default=None, description="Best model by validation score.")
    score: float | None = Field(default=None, description="Best model's validation score.")
    eval_metric: str | None = Field(default=None, description="Metric behind the scores.")
    restarts: int = Field(default=0, description="Times the torchrun group was recreated.")
    next_retry_time: str | None = Field(
        default=None, description="When the next attempt's pods are created after a retryable failure (RFC 3339)."
    )
    last_failure: str | None = Field(
        default=None, description="What ended the previous attempt: rank, exit code and the trainer's last words."
    )
    fallbacks: int | None = Field(
        default=None,
        description="Fits that asked for a GPU and ran on CPU (onGpuUnavailable: FallbackToCPU); never silent.",
    )
    message: str = Field(default="", description="Latest human-readable message.")
    start_time: str | None = Field(default=None, description="When pods were first created (RFC 3339).")
    completion_time: str | None = Field(default=None, description="When the job finished (RFC 3339).")


class ObjectMeta(BaseModel):
    """The parts of metadata tabjob reads; the rest passes through."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(default="tabjob", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=50)
    namespace: str | None = None


class TabularJob(_Model):
    """The TabularJob resource."""

    api_version: Literal["tabjob.dev/v1alpha1"] = Field(
        default="tabjob.dev/v1alpha1", description="tabjob.dev/v1alpha1"
    )
    kind: Literal["TabularJob"] = Field(default="TabularJob", description="TabularJob")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Standard object metadata.")
    spec: TabularJobSpec = Field(description="The run and its resources.")
    status: TabularJobStatus | None = Field(default=None, description="Observed state.")


# --------------------------------------------------------------------------------------------- input


def parse_manifest(doc: Any) -> TabularJob:
    """Validate one manifest document; every problem becomes (field path, message) in a SpecError."""
    if not isinstance(doc, dict):
        raise SpecError.at("(document)", f"a TabularJob manifest is a mapping, got {type(doc).__name__}")
    if doc.get("apiVersion") != API_VERSION:
        raise SpecError.at("apiVersion", f"must be {API_VERSION}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        raise SpecError.at("kind", f"must be {KIND}, got {doc.get('kind')!r}")
    try:
        return TabularJob.model_validate(doc)
    except ValidationError as exc:
        raise SpecError(_problems(exc)) from None


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    out = []
    for err in exc.errors():
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-after"))]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; `kubectl explain tabularjob.spec` lists the fields)"
        elif err["type"] == "literal_error":
            msg = f"must be one of {err.get('ctx', {}).get('expected', '')}"
        out.append((field_path(loc), msg))
    return out


def load_documents(path: str | Path) -> list[Any]:
    """Every YAML document of a file (``-`` reads nothing special: callers pass real paths)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SpecError.at(str(path), f"cannot read the file: {exc.strerror or exc}") from None
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError.at(str(path), f"not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None


def load_manifest(path: str | Path) -> TabularJob:
    """The single TabularJob in a file."""
    docs = load_documents(path)
    if len(docs) != 1:
        raise SpecError.at(str(path), f"expected one TabularJob document, found {len(docs)}")
    return parse_manifest(docs[0])


def to_manifest(job: TabularJob) -> dict[str, Any]:
    """The wire form (camelCase), without unset optional fields."""
    return job.model_dump(by_alias=True, exclude_none=True, mode="json")


# Labels and annotations on a job's children: the operator writes them, the SDK and `tabjob logs` select by them.
LABEL_JOB = "tabjob.dev/job-name"
LABEL_RANK = "tabjob.dev/rank"  # the pod's node rank (its index in the plan)
LABEL_ATTEMPT = "tabjob.dev/attempt"
ANNOTATION_GENERATION = "tabjob.dev/generation"  # the job's spec generation a child was built from
