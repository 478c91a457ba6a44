"""status: what the operator observed, written by it alone (kstatus conditions, the plan, the leaderboard)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    ConfigDict,
    Field,
)

from tabjob.api.base import (
    ApiModel,
)


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
    state: str = Field(default="", description="Succeeded, Failed or Skipped.")
    score_val: float | None = Field(default=None, description="Validation (out-of-fold) score, higher is better.")
    score_test: float | None = Field(default=None, description="Test score, when test data was given.")
    fit_seconds: float | None = Field(default=None, description="Fit time in seconds.")
    predict_ms_per_1000_rows: float | None = Field(
        default=None,
        description="Milliseconds to predict 1,000 rows (every fold model; for the ensemble, every member it weighs).",
    )
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
        description="Where the succeeded job wrote its serving export (spec.export): a path in the output volume, "
        "or a URI under spec.output.uri.",
    )
    output_uri: str | None = Field(
        default=None,
        description="The object storage URI the run lives in (spec.output.uri), committed when the job succeeded.",
    )
    message: str = Field(default="", description="Latest human-readable message.")
    start_time: str | None = Field(default=None, description="When pods were first created (RFC 3339).")
    completion_time: str | None = Field(default=None, description="When the job finished (RFC 3339).")
