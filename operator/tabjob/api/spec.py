"""spec: what a user asks for. Every number has an upper bound and every list a maxItems, the same in the CRD."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, urlparse

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.config import JsonDict

from tabjob.api.base import (
    MAX_CPUS,
    MAX_GPUS,
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
from tabjob.api.identity import OUTPUT_DIR
from tabjob.api.k8s_names import (
    DNS1123_SUBDOMAIN_PATTERN,
    QUALIFIED_NAME_MAX,
    SUBDOMAIN_MAX,
    dns1123_subdomain_problem,
)
from tabjob.api.pod_identity import ENV_LIST, SERVICE_ACCOUNT_DESCRIPTION, EnvFromSource, EnvVar
from tabjob.api.rules import _NAME_A_FAMILY, GPU_FRACTION_RULE, OUTPUT_PATH_RULE, SPEC_LIMIT_RULES
from tabjob.api.scheduling import SchedulingSpec
from tabjob.api.training import (
    BaggingSpec,
    EnsembleSpec,
    ModelsSpec,
    StackingSpec,
    TuningSpec,
)
from tabjob.api.volumes import DATA_VOLUME_SOURCES, OUTPUT_VOLUME_SOURCES, DataVolume, OutputVolume
from tabjob.families import (
    BUILTIN_DATASETS,
    BUILTIN_SCHEME,
    CLASSIFICATION_METRICS,
    FAMILIES,
    METRICS,
    PRESETS,
    REGRESSION_METRICS,
)


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
        description="Training table: a CSV or Parquet file, or a directory or prefix of such files read as one "
        "table (hive partition directories such as region=eu/ become columns; the files must agree on their "
        "columns), as a path inside the data volume (mounted read-only at /data), an s3:// or gs:// URI (a custom "
        "S3 endpoint through AWS_ENDPOINT_URL_S3), another fsspec URI (file://), or a built-in dataset "
        "(sklearn://breast_cancer). See docs/storage.md.",
    )
    test: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="Optional test table in the same form (a file, directory or prefix); adds score_test to the "
        "leaderboard.",
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


# s3:// or gs://, a bucket name as both clouds allow it, then an optional prefix without spaces.
OUTPUT_URI_PATTERN = r"^(s3|gs)://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?$"


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
        + "; without one, an emptyDir: results reach the status through the termination message only, unless "
        "output.uri is set.",
    )
    uri: str | None = Field(
        default=None,
        description="Object storage the run lives in, s3://bucket/prefix/ or gs://bucket/prefix/: models, "
        "leaderboard, reports and spec.export's MLServer export. Fits are copied there as they finish (a resumed "
        "attempt reuses them) and the run is committed last (_COMMITTED.json); readers take the URI "
        "(tabjob predict|serve|report|export). Credentials: spec.serviceAccountName (workload identity) or "
        "spec.envFrom a Secret; a custom endpoint through AWS_ENDPOINT_URL (docs/storage.md).",
        json_schema_extra=crd_string(OUTPUT_URI_PATTERN, 2048),
    )

    @field_validator("uri")
    @classmethod
    def _object_uri(cls, v: str | None) -> str | None:
        if v is not None and not re.match(OUTPUT_URI_PATTERN, v):
            raise ValueError(
                f"{v!r} is not an object storage URI: write s3://BUCKET/PREFIX/ or gs://BUCKET/PREFIX/ (a bucket name "
                "of 3-63 lowercase letters, digits, dots and hyphens)"
            )
        return v

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


# A field the preset fills when the manifest leaves it out: the CRD gives it no default, so that the API server
# does not fill it first and the planner can tell "omitted" from "written" (model_fields_set).
PRESET_FILLS: JsonDict = {"x-tabjob-preset-fills": True}


# What only the pods need, never the trainer: the plan ConfigMap's spec.json leaves these out, so a plain env value is
# kept in the TabularJob alone, and a trainer image older than these fields still reads the spec.
POD_ONLY_FIELDS = frozenset({"service_account_name", "automount_service_account_token", "env", "env_from"})


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
        default_factory=ModelsSpec,
        description=f"Models to train: {', '.join(f'{f.key} ({f.library})' for f in FAMILIES.values())}. "
        "Omitted: the preset's portfolio.",
        json_schema_extra=PRESET_FILLS,
    )
    preset: Literal[PRESETS] | None = Field(  # type: ignore[valid-type]
        default=None,
        description="AutoGluon's presets: medium (each family's default config, no bagging), high (the two "
        "strongest configs per family, 5 folds, a stack layer), best (the whole portfolio, 8 folds, a stack layer, "
        "and with timeLimitSeconds seeded random configs until the leaderboard is full or the time is spent). It "
        "fills what the manifest leaves out: spec.models when omitted, spec.bagging when omitted. Omitted: best "
        "when timeLimitSeconds is set, else medium.",
    )
    bagging: BaggingSpec = Field(
        default_factory=BaggingSpec,
        description="k-fold bagging. Omitted: the preset's (none for medium, 5 folds for high, 8 for best).",
        json_schema_extra=PRESET_FILLS,
    )
    tuning: TuningSpec = Field(default_factory=TuningSpec, description="Hyperparameter trials.")
    ensemble: EnsembleSpec = Field(default_factory=EnsembleSpec, description="Weighted ensemble.")
    stacking: StackingSpec | None = Field(
        default=None,
        description="A stack layer over the base models' out-of-fold predictions, kept only where a holdout "
        "shows it beats their weighted ensemble. Omitted: one level for presets high and best when bagged, none "
        "otherwise; {levels: 0} turns it off.",
    )
    refit_full: bool | None = Field(
        default=None,
        description="AutoGluon's refit_full: once the bagged models are done, the deployed model (the weighted "
        "ensemble's members, or the best model; networks keep their bags, an ensemble one refit is not) is trained "
        "again on every training row, each with the mean of its bag's best iteration counts, and deployed unless a "
        "holdout of the training rows shows the bags scoring higher in 95% of its bootstrap resamples (or "
        "LightGBM's defaults alone scoring higher). The leaderboard shows both, the refit as NAME_FULL. Needs "
        "bagging.folds >= 2. Omitted: on for "
        "presets high and best when bagged, off otherwise.",
    )
    time_limit_seconds: Annotated[Int, Field(ge=1, le=MAX_SECONDS)] | None = Field(
        default=None,
        description="Training time budget; fits that cannot start in time are skipped.",
    )
    infer_limit_ms_per1000_rows: Annotated[float, Field(gt=0, le=MAX_SECONDS * 1000.0)] | None = Field(
        default=None,
        alias="inferLimitMsPer1000Rows",
        description="Cap on the deployed model's inference cost, as AutoGluon's infer_limit: milliseconds to "
        "predict 1,000 rows (the leaderboard's predict_ms_per_1000_rows, timed on the validation rows). Models "
        "over it are kept on the leaderboard but never deployed, and the ensemble only weighs members whose "
        "costs add up to at most this. Omitted: no cap.",
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
    service_account_name: str | None = Field(
        default=None,
        description=SERVICE_ACCOUNT_DESCRIPTION,
        json_schema_extra=crd_string(DNS1123_SUBDOMAIN_PATTERN, SUBDOMAIN_MAX),
    )
    automount_service_account_token: bool = Field(
        default=False,
        description="Mount the ServiceAccount's API token into the pods (default false: the trainer needs no API "
        "access; results travel by termination message).",
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Variables for every trainer pod: a value, or valueFrom a Secret's or ConfigMap's key. Names "
        "tabjob sets itself (MASTER_ADDR, RANK, OMP_NUM_THREADS, POD_IP, PET_*, TABJOB_*, ...) are refused.",
        json_schema_extra=ENV_LIST,
    )
    env_from: list[EnvFromSource] = Field(
        default_factory=list,
        max_length=16,
        description="Every key of a Secret (secretRef) or ConfigMap (configMapRef) as a variable, optionally "
        "prefixed. A key named like one of tabjob's variables is overridden by tabjob's value (env wins over "
        "envFrom).",
    )
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

    @field_validator("service_account_name")
    @classmethod
    def _service_account(cls, v: str | None) -> str | None:
        problem = dns1123_subdomain_problem(v) if v is not None else None
        if problem:
            raise ValueError(f"{problem} (a ServiceAccount's name)")
        return v

    @model_serializer(mode="wrap")
    def _keep_omissions(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A field the preset fills stays out of a dump when the manifest left it out, so that a spec written
        back (spec.json, the plan ConfigMap, `tabjob render`) still means "the preset's"."""
        out: dict[str, Any] = handler(self)
        for name in ("models", "bagging"):
            if name not in self.model_fields_set:
                out.pop(name, None)
        return out

    @model_validator(mode="after")
    def _has_models(self) -> TabularJobSpec:
        if "models" in self.model_fields_set and not self.models.items():
            raise ValueError(f"models: {_NAME_A_FAMILY}, or leave models out to train the preset's portfolio")
        return self
