"""The TabularJob API: pydantic models of spec and status, the single source of the CRD.

Python attributes are snake_case; the wire format (YAML, the CRD) is camelCase through aliases.
Unknown fields are errors everywhere (``extra="forbid"``) so a typo such as ``bagginng`` is caught,
except inside free-form maps (hyperparameters) that the model owns. Types are strict, as the API server's
are: ``cpus: "2"``, ``cpus: true`` or ``suspend: "false"`` are refused, never coerced (``2.0`` is 2, as in JSON).
Every number has an upper bound and every list a maxItems, the same in the CRD, so nothing validate accepts can
overflow a pod request, a status list or a ConfigMap. Cross-field checks that need arithmetic over several
levels live in the planner; the ones an API server can evaluate itself are also written as CEL rules
(``x-kubernetes-validations``) here, in the same terms as the Python check beside them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, urlparse

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

# The building blocks, volume sources and scheduling live in their own modules; they are part of this API.
from tabjob.api_base import (
    MAX_CPUS,
    MAX_GPUS,
    MAX_INT,
    MAX_LIST,
    MAX_MEMORY,
    MAX_SECONDS,
    QUANTITY_PATTERN,
    ApiModel,
    Int,
    crd_string,
    is_valid_gpu_amount,
    parse_quantity,
)
from tabjob.errors import SpecError, field_path
from tabjob.families import (
    BUILTIN_DATASETS,
    BUILTIN_LABEL,
    BUILTIN_SCHEME,
    CLASSIFICATION_METRICS,
    FAMILIES,
    METRICS,
    MODEL_KEYS,
    REGRESSION_METRICS,
)
from tabjob.k8s_names import (
    QUALIFIED_NAME_MAX,
    dns1035_label_problem,
    dns1123_label_problem,
    label_value_problem,
    qualified_name_problem,
)
from tabjob.manifest_yaml import json_problems, parse_yaml, read_text
from tabjob.scheduling import SchedulingSpec, Toleration
from tabjob.volumes import DATA_VOLUME_SOURCES, OUTPUT_VOLUME_SOURCES, DataVolume, OutputVolume, VolumeSource

__all__ = [
    "BUILTIN_DATASETS",
    "BUILTIN_LABEL",
    "BUILTIN_SCHEME",
    "CLASSIFICATION_METRICS",
    "DATA_VOLUME_SOURCES",
    "MAX_CPUS",
    "MAX_GPUS",
    "MAX_INT",
    "MAX_LIST",
    "METRICS",
    "MODEL_KEYS",
    "OUTPUT_VOLUME_SOURCES",
    "REGRESSION_METRICS",
    "SchedulingSpec",
    "Toleration",
    "VolumeSource",
    "is_valid_gpu_amount",
    "parse_quantity",
]

GROUP = "tabjob.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TabularJob"
PLURAL = "tabularjobs"
SINGULAR = "tabularjob"
SHORT_NAMES = ["tj", "tabjob"]

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


# ------------------------------------------------------------------------------------------ limits
# Every object tabjob creates must stay within Kubernetes' limits; the planner refuses plans beyond these, and the
# CRD carries the ones that are plain arithmetic over the spec (SPEC_LIMIT_RULES), so both refuse the same specs.
MAX_PODS = 64  # status.plan.pods maxItems
MAX_LEADERBOARD_ROWS = 64  # status.models maxItems: one row per config and trial, plus the ensemble
MAX_FITS = 1000  # fits in one plan: every fit is a line of the plan ConfigMap
CONFIGMAP_LIMIT = 2**20  # bytes of a ConfigMap's data (keys and values), as the API server counts them
MAX_NAME = 50  # metadata.name: pods are <name>-<index>-r<attempt>, hostnames of at most 63
OUTPUT_DIR = "/output"

_CONFIGS = " + ".join(f"(has(self.models.{key}) ? size(self.models.{key}) : 0)" for key in MODEL_KEYS)
_HYPERPARAMETERS = "; ".join(f"{f.hyperparameters} for {f.key}" for f in FAMILIES.values())
_NAME_A_FAMILY = f"name at least one of {', '.join(MODEL_KEYS)} with a list of configs, e.g. {MODEL_KEYS[0]}: [{{}}]"
_TRIALS = "(has(self.tuning) && has(self.tuning.trials) ? self.tuning.trials : 1)"
_ENSEMBLE_ROW = "(!has(self.ensemble) || !has(self.ensemble.size) || self.ensemble.size > 0 ? 1 : 0)"
_FOLDS = (
    "(has(self.bagging) && has(self.bagging.folds) && self.bagging.folds >= 2 ? "
    "self.bagging.folds * (has(self.bagging.sets) ? self.bagging.sets : 1) : 1)"
)
SPEC_LIMIT_RULES: list[JsonValue] = [
    {
        "rule": f"({_CONFIGS}) > 0",
        "message": _NAME_A_FAMILY,
        "fieldPath": ".models",
        "reason": "FieldValueRequired",
    },
    {
        "rule": f"({_CONFIGS}) * {_TRIALS} + {_ENSEMBLE_ROW} <= {MAX_LEADERBOARD_ROWS}",
        "message": f"the leaderboard (model configs x tuning.trials, plus the ensemble) would exceed the "
        f"{MAX_LEADERBOARD_ROWS} rows status.models holds; use fewer configs or trials",
        "fieldPath": ".tuning.trials",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": f"({_CONFIGS}) * {_TRIALS} * {_FOLDS} <= {MAX_FITS}",
        "message": f"fits (model configs x tuning.trials x bagging.folds x bagging.sets) would exceed the "
        f"limit of {MAX_FITS} per job; use fewer trials, folds or sets",
        "fieldPath": ".tuning.trials",
        "reason": "FieldValueInvalid",
    },
]

OUTPUT_PATH_RULE = (
    f"self.path == '{OUTPUT_DIR}' || (self.path.startsWith('{OUTPUT_DIR}/') && !self.path.contains('/../') "
    "&& !self.path.endsWith('/..'))"
)


# ---------------------------------------------------------------------------------------------- spec


class DataSpec(ApiModel):
    """Where the training data lives and what to predict."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!(self.problemType in ['binary', 'multiclass'] && self.evalMetric in "
                    f"{list(REGRESSION_METRICS)!r}) && !(self.problemType == 'regression' && self.evalMetric in "
                    f"{list(CLASSIFICATION_METRICS)!r})",
                    "message": f"evalMetric does not apply to problemType: classification takes one of "
                    f"{', '.join(CLASSIFICATION_METRICS)}; regression one of {', '.join(REGRESSION_METRICS)}",
                    "fieldPath": ".evalMetric",
                    "reason": "FieldValueInvalid",
                }
            ]
        }
    )

    train: str = Field(
        min_length=1,
        max_length=4096,
        description="Training table, CSV or Parquet: a path inside the data volume (mounted read-only at "
        "/data), an fsspec URI (s3://, gs://, file://), or a built-in dataset (sklearn://breast_cancer).",
    )
    test: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="Optional test table in the same form; adds score_test to the leaderboard.",
    )
    label: str = Field(min_length=1, max_length=1024, description="Name of the column to predict.")
    problem_type: Literal["auto", "binary", "multiclass", "regression"] = Field(
        default="auto", description="auto infers binary, multiclass or regression from the label column."
    )
    eval_metric: Literal[METRICS] = Field(  # type: ignore[valid-type]
        default="auto",
        description="Metric that ranks models, reported higher-is-better (errors negated, as AutoGluon "
        "does): accuracy, balanced_accuracy, roc_auc, log_loss, f1 (classification); rmse, mae, r2 "
        "(regression); auto picks accuracy for classification and rmse for regression.",
    )
    volume: DataVolume | None = Field(
        default=None,
        description="A pod volume source mounted read-only at /data, one of "
        + ", ".join(DATA_VOLUME_SOURCES)
        + " (others, such as hostPath, are refused).",
    )

    @field_validator("train", "test")
    @classmethod
    def _builtin_dataset(cls, v: str | None) -> str | None:
        if v is not None and v.startswith(BUILTIN_SCHEME):
            builtin_dataset(v)
        return v


def metric_mismatch(problem: str, metric: str) -> str | None:
    """Why ``metric`` cannot rank a ``problem``, or None; ``auto`` problems are judged once data is read."""
    if problem in ("binary", "multiclass") and metric in REGRESSION_METRICS:
        return f"{metric} is a regression metric; for {problem} use one of {', '.join(CLASSIFICATION_METRICS)}"
    if problem == "regression" and metric in CLASSIFICATION_METRICS:
        return f"{metric} is a classification metric; for regression use one of {', '.join(REGRESSION_METRICS)}"
    return None


def builtin_dataset(uri: str) -> tuple[str, str]:
    """(name, problem type) of a ``sklearn://NAME[?split=train|test|all]`` URI; ValueError names what exists."""
    parsed = urlparse(uri)
    name = parsed.netloc or parsed.path.lstrip("/")
    if name not in BUILTIN_DATASETS:
        raise ValueError(f"no built-in dataset {name!r}; choose one of {', '.join(BUILTIN_DATASETS)}")
    query = parse_qs(parsed.query, keep_blank_values=True)
    if set(query) - {"split"} or (parsed.path.strip("/") and parsed.netloc):
        raise ValueError(f"{uri!r}: write sklearn://{name} or sklearn://{name}?split=train (or test, all)")
    splits = query.get("split", ["all"])
    if len(splits) != 1 or splits[0] not in ("train", "test", "all"):
        raise ValueError(f"{uri!r}: split must be train, test or all, not {', '.join(splits)}")
    return name, BUILTIN_DATASETS[name]


class OutputSpec(ApiModel):
    """Where models, leaderboard.json, plan.json, metrics and logs are written."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": OUTPUT_PATH_RULE,
                    "message": f"path must be {OUTPUT_DIR} or a directory under it (e.g. {OUTPUT_DIR}/adult), "
                    "without '..': the output volume is mounted there",
                    "fieldPath": ".path",
                    "reason": "FieldValueInvalid",
                }
            ]
        }
    )

    path: str = Field(
        default=OUTPUT_DIR,
        min_length=1,
        max_length=1024,
        description=f"Output directory inside the output volume's mount {OUTPUT_DIR}, e.g. {OUTPUT_DIR}/adult; "
        f"default {OUTPUT_DIR}.",
    )
    volume: OutputVolume | None = Field(
        default=None,
        description="A pod volume source mounted read-write at /output, one of "
        + ", ".join(OUTPUT_VOLUME_SOURCES)
        + "; without one, an emptyDir: results reach the status through the termination message only.",
    )

    @field_validator("path")
    @classmethod
    def _inside_mount(cls, v: str) -> str:
        if not output_path_ok(v):
            raise ValueError(
                f"{v!r} is outside the output volume: use {OUTPUT_DIR} or a directory under it "
                f"(e.g. {OUTPUT_DIR}/adult), without '..'"
            )
        return v


def output_path_ok(path: str) -> bool:
    """The same test as OUTPUT_PATH_RULE, so validate and the API server agree to the character."""
    return path == OUTPUT_DIR or (path.startswith(OUTPUT_DIR + "/") and "/../" not in path and not path.endswith("/.."))


class BudgetSpec(ApiModel):
    """Predictor-level resources (AutoGluon fit(num_cpus, num_gpus)): the whole job's budget."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [GPU_FRACTION_RULE]})

    cpus: Int = Field(default=1, ge=1, le=MAX_CPUS, description="CPUs the whole job may use (whole number, >= 1).")
    gpus: float = Field(default=0, ge=0, le=MAX_GPUS, description="GPUs the whole job may use; 0 for a CPU-only job.")
    memory: str | None = Field(
        default=None,
        description="Memory for the whole job as a Kubernetes quantity (64Gi); split over the pods by ranks.",
        json_schema_extra=crd_string(QUANTITY_PATTERN, 64),
    )
    gpu_resource: str = Field(
        default="nvidia.com/gpu",
        min_length=1,
        max_length=QUALIFIED_NAME_MAX,
        pattern=r"^[a-z0-9.-]+/[A-Za-z0-9._-]+$",
        description="Extended resource the pods' GPU limits use: nvidia.com/gpu, amd.com/gpu, "
        "nvidia.com/mig-1g.10gb, nvidia.com/gpu.shared, ...",
    )
    gpus_per_pod: Int = Field(default=8, ge=1, le=64, description="Largest number of GPUs one pod may hold.")
    cpus_per_pod: Annotated[Int, Field(ge=1, le=MAX_CPUS)] | None = Field(
        default=None,
        description="CPU-only jobs: largest number of CPUs one pod may hold (default: one pod).",
    )

    @field_validator("memory")
    @classmethod
    def _memory_is_quantity(cls, v: str | None) -> str | None:
        if v is not None:
            amount = parse_quantity(v)
            if not 2**20 <= amount <= MAX_MEMORY:
                raise ValueError(f"{v} is outside 1Mi..1Pi")
        return v

    @field_validator("gpus")
    @classmethod
    def _gpus_fraction(cls, v: float) -> float:
        if not is_valid_gpu_amount(v):
            raise ValueError("must be a whole number of GPUs or a fraction that divides one GPU (0.5, 0.25)")
        return v


class FitResources(ApiModel):
    """Resources of one fit (AutoGluon ag_args_fit) or of one bagged model (ag_args_ensemble)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [GPU_FRACTION_RULE]})

    cpus: Annotated[Int, Field(ge=1, le=MAX_CPUS)] | None = Field(
        default=None, description="CPUs (whole number, >= 1); omitted: inherited."
    )
    gpus: float | None = Field(
        default=None,
        ge=0,
        le=MAX_GPUS,
        description="GPUs: a whole number or a fraction that divides one GPU (0.5, 0.25, 1/3); fractional "
        "fits share one physical GPU. Omitted: inherited.",
    )

    @field_validator("gpus")
    @classmethod
    def _gpus_fraction(cls, v: float | None) -> float | None:
        if v is not None and not is_valid_gpu_amount(v):
            raise ValueError("must be a whole number of GPUs or a fraction that divides one GPU (0.5, 0.25)")
        return v


class ModelConfig(ApiModel):
    """One model configuration (one entry of AutoGluon's hyperparameters list)."""

    name: str | None = Field(
        default=None,
        description="Leaderboard name; default the model key, then KEY_2, KEY_3 for further configs.",
        json_schema_extra=crd_string(_MODEL_NAME.pattern, 63),
    )
    hyperparameters: dict[str, Any] = Field(
        default_factory=dict,
        description=f"Model hyperparameters ({_HYPERPARAMETERS}).",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    resources: FitResources | None = Field(
        default=None, description="Resources per fit (per fold when bagged), like AutoGluon's ag_args_fit."
    )
    processes: Int = Field(
        default=1,
        ge=1,
        le=MAX_GPUS,
        description="More than 1: one fit trained data-parallel (DDP / LightGBM data-parallel) over that "
        "many ranks; its resources are the total over those ranks.",
    )

    @field_validator("name")
    @classmethod
    def _name_shape(cls, v: str | None) -> str | None:
        if v is not None and not _MODEL_NAME.match(v):
            raise ValueError("must start with a letter and hold only letters, digits, '_', '.', '-' (<= 63)")
        return v


# One optional list of configs per model family, named by its key (families.py holds the families).
_FAMILY_FIELDS: dict[str, Any] = {
    f.key: (
        list[ModelConfig] | None,
        Field(default=None, alias=f.key, max_length=MAX_LIST, description=f"{f.library} configs."),
    )
    for f in FAMILIES.values()
}
_FamilyConfigs: Any = create_model("_FamilyConfigs", __base__=ApiModel, **_FAMILY_FIELDS)


class ModelsSpec(_FamilyConfigs):  # its fields: one per family in families.py
    """Models to train, in AutoGluon's hyperparameters shape: model key -> list of configs."""

    def items(self) -> list[tuple[str, list[ModelConfig]]]:
        return [(key, getattr(self, key)) for key in MODEL_KEYS if getattr(self, key)]

    def count(self) -> int:
        return sum(len(configs) for _, configs in self.items())


class BaggingSpec(ApiModel):
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

    folds: Int = Field(default=0, ge=0, le=100, description="Folds per bagged model; 0 turns bagging off.")
    sets: Int = Field(default=1, ge=1, le=20, description="Times the k-fold split is repeated (new seed).")
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


class SearchDimension(ApiModel):
    """One searched hyperparameter: exactly one of int, uniform, logUniform, choice."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    # `choice` holds values of any type, so CEL cannot see the field at all; the rest of the
                    # exactly-one check (choice with a range, or nothing at all) is the planner's.
                    "rule": "[has(self.int), has(self.uniform), has(self.logUniform)].filter(x, x).size() <= 1",
                    "message": "set only one of int, uniform, logUniform, choice",
                }
            ]
        }
    )

    int_: list[Annotated[Int, Field(ge=-MAX_INT, le=MAX_INT)]] | None = Field(
        default=None, alias="int", min_length=2, max_length=2, description="[low, high] integers, inclusive."
    )
    uniform: list[Annotated[float, Field(ge=-MAX_INT, le=MAX_INT)]] | None = Field(
        default=None, min_length=2, max_length=2, description="[low, high] floats, uniform."
    )
    log_uniform: list[Annotated[float, Field(ge=-MAX_INT, le=MAX_INT)]] | None = Field(
        default=None, min_length=2, max_length=2, description="[low, high] floats > 0, log-uniform."
    )
    choice: list[Any] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LIST,
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


class TuningSpec(ApiModel):
    """Hyperparameter tuning (AutoGluon hyperparameter_tune_kwargs)."""

    searcher: Literal["random"] = Field(default="random", description="Search algorithm: random.")
    scheduler: Literal["local"] = Field(default="local", description="Trial scheduler: local.")
    trials: Int = Field(default=1, ge=1, le=1000, description="Trials per model config; 1 turns tuning off.")
    search_space: dict[str, Annotated[dict[str, SearchDimension], Field(max_length=MAX_LIST)]] = Field(
        default_factory=dict,
        max_length=MAX_LIST,
        description=f"Model key ({', '.join(MODEL_KEYS)}) or config name -> hyperparameter -> dimension; models "
        "without an entry use tabjob's default space.",
    )


class EnsembleSpec(ApiModel):
    """Caruana weighted ensemble over out-of-fold or validation predictions."""

    size: Int = Field(default=25, ge=0, le=1000, description="Selection rounds; 0 turns the ensemble off.")


class RunPolicy(ApiModel):
    """Retries, deadlines and clean-up, as in Kubeflow's runPolicy."""

    backoff_limit: Int = Field(default=3, ge=0, le=100, description="Retries of the whole torchrun group.")
    active_deadline_seconds: Annotated[Int, Field(ge=1, le=MAX_SECONDS)] | None = Field(
        default=None,
        description="Fail the job (DeadlineExceeded) after this many seconds running.",
    )
    ttl_seconds_after_finished: Annotated[Int, Field(ge=0, le=MAX_SECONDS)] | None = Field(
        default=None, description="Delete the job this many seconds after it finished."
    )
    suspend: bool = Field(default=False, description="true deletes the pods and keeps results; false resumes.")


class ExportSpec(ApiModel):
    """A serving export the job writes into its output when it succeeds (docs/serving.md)."""

    format: Literal["mlserver"] = Field(
        default="mlserver",
        description="mlserver: an MLServer model repository of the best model at <output.path>/mlserver, served by "
        "`mlserver start`, `tabjob serve` or a KServe InferenceService (`tabjob export --format kserve`).",
    )


class TabularJobSpec(ApiModel):
    """A tabular training run and its resources."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": SPEC_LIMIT_RULES})

    data: DataSpec = Field(description="Training data and label.")
    output: OutputSpec = Field(
        default_factory=OutputSpec,
        description=f"Where results are written; default {OUTPUT_DIR} (an emptyDir unless output.volume is set).",
    )
    resources: BudgetSpec = Field(default_factory=BudgetSpec, description="The job's whole budget.")
    models: ModelsSpec = Field(
        description=f"Models to train: {' and '.join(f'{f.key} ({f.library})' for f in FAMILIES.values())}."
    )
    bagging: BaggingSpec = Field(default_factory=BaggingSpec, description="k-fold bagging.")
    tuning: TuningSpec = Field(default_factory=TuningSpec, description="Hyperparameter trials.")
    ensemble: EnsembleSpec = Field(default_factory=EnsembleSpec, description="Weighted ensemble.")
    time_limit_seconds: Annotated[Int, Field(ge=1, le=MAX_SECONDS)] | None = Field(
        default=None,
        description="Training time budget; fits that cannot start in time are skipped.",
    )
    on_gpu_unavailable: Literal["Fail", "FallbackToCPU"] = Field(
        default="Fail",
        description="What a fit that asked for a GPU does when none works: Fail, or FallbackToCPU (recorded "
        "on the leaderboard; never silent).",
    )
    image: str | None = Field(
        default=None,
        description="Trainer image; default from the operator's settings.",
        json_schema_extra=crd_string(r"^\S+$", 1024),
    )
    run_policy: RunPolicy = Field(default_factory=RunPolicy, description="Retries, deadlines, clean-up.")
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec, description="Pod placement.")
    export: ExportSpec | None = Field(
        default=None,
        description="Write a serving export of the best model into the output on success ({format: mlserver}); "
        "status.exportPath names where.",
    )

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^\S+$", v):
            raise ValueError("an image reference without spaces, e.g. ghcr.io/example/tabjob-trainer:0.1.0")
        return v

    @model_validator(mode="after")
    def _has_models(self) -> TabularJobSpec:
        if not self.models.items():
            raise ValueError(f"models: {_NAME_A_FAMILY}")
        return self


# -------------------------------------------------------------------------------------------- status


class Condition(ApiModel):
    """A kstatus-style condition."""

    type: str = Field(description="Ready, Reconciling, Stalled, Running, Succeeded, Failed or Suspended.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(default="", description="CamelCase reason.")
    message: str = Field(default="", description="Human-readable detail.")
    last_transition_time: str | None = Field(default=None, description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(default=None, description="Generation this condition reflects.")


class ResourceAmount(ApiModel):
    """CPUs and GPUs."""

    cpus: float = Field(default=0, description="CPUs.")
    gpus: float = Field(default=0, description="GPUs.")


class PodSummary(ApiModel):
    """One planned pod."""

    name: str = Field(description="Pod name.")
    cpus: int = Field(description="CPUs requested.")
    gpus: int = Field(description="Whole GPUs on the GPU resource.")
    memory: str | None = Field(default=None, description="Memory requested.")
    procs: int = Field(description="torchrun processes (ranks) in this pod.")


class Concurrency(ApiModel):
    """What runs at once at the plan's peak."""

    trials: int = Field(description="Trials in parallel.")
    folds: int = Field(description="Folds in parallel within a trial.")
    fits: int = Field(description="Fits at once (trials x folds).")


class PlanSummary(ApiModel):
    """The resolved plan as published in status (the full plan, with every fit, is in the ConfigMap)."""

    pods: list[PodSummary] = Field(default_factory=list, description="Planned pods.")
    world_size: int = Field(default=0, description="torchrun processes over all pods.")
    concurrency: Concurrency | None = Field(default=None, description="Parallelism at the peak.")
    peak: ResourceAmount | None = Field(default=None, description="Largest resources in use at once.")
    requested: ResourceAmount | None = Field(default=None, description="What the pods request.")
    fits: int = Field(default=0, description="Number of fits.")
    warnings: list[str] = Field(default_factory=list, description="Planner warnings.")


class ModelStatus(ApiModel):
    """One leaderboard row."""

    name: str = Field(description="Model name.")
    state: str = Field(default="", description="Succeeded, Failed, Skipped or Running.")
    score_val: float | None = Field(default=None, description="Validation (out-of-fold) score, higher is better.")
    score_test: float | None = Field(default=None, description="Test score, when test data was given.")
    fit_seconds: float | None = Field(default=None, description="Fit time in seconds.")
    gpus: float | None = Field(default=None, description="GPUs per fit.")
    device: str | None = Field(default=None, description="Device the fit ran on (cpu, cuda).")


class ProgressStatus(ApiModel):
    """status.progress: fits done while running (from rank 0's ProgressSnapshot), and the final counts."""

    fits_done: int = Field(default=0, description="Fits finished.")
    fits_total: int = Field(default=0, description="Fits planned.")
    best_score: float | None = Field(default=None, description="Best validation score so far.")
    best_model: str | None = Field(default=None, description="Model holding the best score so far.")
    fits_failed: int = Field(default=0, description="Fits that failed.")
    updated_time: str | None = Field(default=None, description="When progress was last read (RFC 3339).")
    summary: str = Field(default="", description="fitsDone/fitsTotal, for kubectl get.")


class TabularJobStatus(ApiModel):
    """Observed state, written by the operator."""

    model_config = ConfigDict(extra="ignore")

    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Suspended"] | None = Field(
        default=None, description="Pending, Running, Succeeded, Failed or Suspended."
    )
    observed_generation: int | None = Field(default=None, description="Spec generation last reconciled.")
    conditions: list[Condition] = Field(default_factory=list, description="kstatus conditions and more.")
    plan: PlanSummary | None = Field(default=None, description="The resolved plan.")
    requested_gpus: int | None = Field(default=None, description="Whole GPUs the pods request.")
    progress: ProgressStatus | None = Field(default=None, description="Fits done and best score so far.")
    models: list[ModelStatus] = Field(default_factory=list, description="Leaderboard, best first.")
    best_model: str | None = Field(default=None, description="Best model by validation score.")
    score: float | None = Field(default=None, description="Best model's validation score.")
    eval_metric: str | None = Field(default=None, description="Metric behind the scores.")
    restarts: int = Field(default=0, description="Times the torchrun group was recreated.")
    requeues: int = Field(
        default=0,
        description="Times a job queued through Kueue went back to its queue without a failure (evicted,"
        " suspended): each starts a new pod group and counts no restart.",
    )
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
    export_path: str | None = Field(
        default=None,
        description="Where the succeeded job wrote its serving export (spec.export), in the output volume.",
    )
    message: str = Field(default="", description="Latest human-readable message.")
    start_time: str | None = Field(default=None, description="When pods were first created (RFC 3339).")
    completion_time: str | None = Field(default=None, description="When the job finished (RFC 3339).")


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


# --------------------------------------------------------------------------------------------- input


def parse_manifest(doc: Any) -> TabularJob:
    """Validate one manifest document; every problem becomes (field path, message) in a SpecError."""
    if not isinstance(doc, dict):
        raise SpecError.at("(document)", f"a TabularJob manifest is a mapping, got {type(doc).__name__}")
    not_json = json_problems(doc)
    if not_json:
        raise SpecError(not_json)
    doc = without_nulls(doc)
    if doc.get("apiVersion") != API_VERSION:
        raise SpecError.at("apiVersion", f"must be {API_VERSION}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        raise SpecError.at("kind", f"must be {KIND}, got {doc.get('kind')!r}")
    try:
        job = TabularJob.model_validate(doc)
    except ValidationError as exc:
        raise SpecError(_problems(exc, doc)) from None
    problems = spec_problems(job.spec)
    if problems:
        raise SpecError(problems)
    return job


# Free-form values keep their nulls, as the API server keeps them under x-kubernetes-preserve-unknown-fields.
_FREE_FORM = frozenset({"hyperparameters", "choice"})


def without_nulls(node: Any) -> Any:
    """The document as the API server stores it: a null field is dropped (and then defaulted), as if never given."""
    if isinstance(node, dict):
        return {k: v if k in _FREE_FORM else without_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [without_nulls(v) for v in node]
    return node


def spec_problems(spec: TabularJobSpec) -> list[tuple[str, str]]:
    """Contradictions between fields that need no data: built-in datasets, label, problem type and metric."""
    data, out = spec.data, []
    problem: str = data.problem_type
    builtins: dict[str, tuple[str, str]] = {}
    for field in ("train", "test"):
        uri = getattr(data, field)
        if uri and uri.startswith(BUILTIN_SCHEME):
            builtins[field] = builtin_dataset(uri)
    for name, kind in builtins.values():
        if data.label != BUILTIN_LABEL:
            out.append(("spec.data.label", f"the built-in dataset {name} labels its rows {BUILTIN_LABEL!r}"))
        if problem not in ("auto", kind):
            out.append(("spec.data.problemType", f"the built-in dataset {name} is a {kind} problem, not {problem}"))
        problem = kind if problem == "auto" else problem
    if len({name for name, _ in builtins.values()}) > 1:
        out.append(("spec.data.test", "train and test must be splits of the same built-in dataset"))
    mismatch = metric_mismatch(problem, data.eval_metric)
    if mismatch:
        out.append(("spec.data.evalMetric", mismatch))
    return sorted(set(out))


_BOUND_WORDS = {
    "less_than_equal": ("most", "le"),
    "greater_than_equal": ("least", "ge"),
    "too_long": ("most", "max_length"),
    "too_short": ("least", "min_length"),
    "string_too_long": ("most", "max_length"),
    "string_too_short": ("least", "min_length"),
}
_UNITS = {
    "too_long": "items (the CRD's maxItems)",
    "too_short": "items",
    "string_too_long": "characters",
    "string_too_short": "characters",
}


def _bound_message(kind: str, ctx: dict[str, Any], got: Any) -> str:
    word, key = _BOUND_WORDS[kind]
    unit = f" {_UNITS[kind]}" if kind in _UNITS else ""
    seen = len(got) if isinstance(got, str | list | dict) else repr(got)[:40]
    bound = ctx.get(key)
    if isinstance(bound, float) and bound.is_integer():
        bound = int(bound)
    return f"must be at {word} {bound}{unit}, got {seen}"


def _problems(exc: ValidationError, doc: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for err in exc.errors():
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith(("function-", "lax-or-strict")))]
        msg = err["msg"].removeprefix("Value error, ")
        kind = err["type"]
        parent = loc[-2] if len(loc) >= 2 else None
        if kind == "extra_forbidden" and parent == "models" and len(loc) == 3:
            msg = f"no model family {loc[-1]!r}; use one of {', '.join(MODEL_KEYS)}"
        elif kind == "extra_forbidden" and parent == "volume":
            allowed = DATA_VOLUME_SOURCES if loc[1] == "data" else OUTPUT_VOLUME_SOURCES
            msg = f"{loc[-1]!r} is not an allowed volume source for {loc[1]}; use one of {', '.join(allowed)}"
        elif kind == "extra_forbidden":
            msg = "unknown field (check the spelling; `kubectl explain tabularjob.spec` lists the fields)"
        elif kind == "string_pattern_mismatch":
            msg = f"{err.get('input')!r:.60} must match {err.get('ctx', {}).get('pattern')}"
        elif kind == "literal_error":
            msg = f"must be one of {err.get('ctx', {}).get('expected', '')}"
        elif kind == "missing" and loc == ["metadata", "name"]:
            hint = (
                " (generateName is not supported: the name must be known to plan)"
                if "generateName" in (doc.get("metadata") or {})
                else ""
            )
            msg = f"required: a DNS-1035 label of at most {MAX_NAME} characters, e.g. adult-gbm{hint}"
        elif kind == "missing":
            msg = "required field is missing"
        elif kind in _BOUND_WORDS:
            msg = _bound_message(kind, err.get("ctx", {}), err.get("input"))
        elif kind in ("int_type", "float_type", "bool_type", "string_type", "dict_type", "list_type", "model_type"):
            want = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
                    "string_type": "a string", "dict_type": "a mapping", "list_type": "a list",
                    "model_type": "a mapping"}[kind]  # fmt: skip
            got = err.get("input")
            msg = f"must be {want}, not {type(got).__name__} {got!r:.40}" + (
                " (the API server does not convert types: write it unquoted)" if isinstance(got, str) else ""
            )
        out.append((field_path(loc), msg))
    return out


def load_documents(path: str | Path) -> list[Any]:
    """Every YAML document of a file, read as kubectl reads it (see manifest_yaml)."""
    return parse_yaml(read_text(path), str(path))


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
