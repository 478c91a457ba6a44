"""What the trainer reports back: the contract between a trainer pod and the operator, beside ``plan.py``.

Three messages cross that boundary, each one typed model with one spelling (camelCase on the wire):

- ``RunSummary``: the short JSON rank 0 writes to the container's termination message (and ``tabjob run`` prints);
  the operator turns it into ``status.models``, ``bestModel`` and ``score``. A non-zero rank writes nothing, so the
  kubelet's ``FallbackToLogsOnError`` can still show a crashed rank's log tail.
- ``ProgressSnapshot``: what rank 0 serves on its progress port while the job runs (``status.progress``).
- ``FitEvent``: one line of ``progress.jsonl`` and of a trainer's standard output (a job or a fit started or ended);
  ``tabjob run``'s progress bar, the benchmarks and the tests read these lines and nothing else.

A fit's state has one vocabulary everywhere, ``FitState``: Succeeded, Failed or Skipped.

Both refuse non-finite numbers: a NaN score must never reach the API server, which rejects it and strands the job.
Writers build these models; readers call ``model_validate_json`` and treat a ``ValidationError`` as "no summary".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

PROGRESS_FILE = "progress.jsonl"  # FitEvent lines, in every rank's output directory
TERMINATION_LIMIT = 4000  # Kubernetes keeps at most 4096 bytes of a termination message

FitState = Literal["Succeeded", "Failed", "Skipped"]
# Why a job could not run, as its Failed reason. InvalidData: the data is wrong (a fix to the data or spec is needed);
# DataUnavailable: the store refused or could not serve the input after the trainer's own bounded retries (wrong
# credentials, a missing bucket or prefix); OutputRefused: spec.output.uri's store said no for good (access denied,
# no such bucket); OutputUnavailable: it was down, busy or slow past the retries. Only OutputUnavailable is retried as
# a new attempt, which resumes from the fits already in the bucket. OutOfMemory: the table's metadata show that a pod
# cannot hold what it would read (the trainer's check before a row is read); another attempt would meet the same limit.
ErrorReason = Literal[
    "InvalidData", "DataUnavailable", "OutputRefused", "OutputUnavailable", "InferLimit", "ExportFailed", "OutOfMemory"
]
RETRIED_ERRORS: tuple[str, ...] = ("OutputUnavailable",)
# What a progress line reports: a job's start and end on rank 0, a fit's start and end on its leader rank, and a fit
# an earlier attempt already finished (a resume loads it instead of fitting it again).
EventKind = Literal["JobStarted", "FitStarted", "FitEnded", "FitResumed", "JobEnded"]


class _ResultsModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, allow_inf_nan=False
    )

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True, exclude_defaults=True)


# A leaderboard row in the run's leaderboard.json and .csv: AutoGluon's leaderboard column names (snake_case), so the
# two read side by side; `state` is a FitState. The ensemble's JSON row adds its `weights`.
LEADERBOARD_COLUMNS = ("model", "score_val", "score_test", "eval_metric", "pred_time_val", "predict_ms_per_1000_rows",
                       "fit_time", "fit_order", "device", "gpus", "rank", "state", "fallback", "note")  # fmt: skip


class ModelResult(_ResultsModel):
    """One leaderboard row as status shows it: a bagged model, a trial, or the weighted ensemble.

    The same row as leaderboard.json's, under the column each field comes from (``COLUMN_OF``); status.models[]
    (``api.status.ModelStatus``) shows these fields less ``NOT_IN_STATUS`` (tests/unit/test_contracts.py ties the
    three shapes).
    """

    name: str = Field(min_length=1)
    state: FitState
    score_val: float | None = None
    score_test: float | None = None
    fit_seconds: float | None = Field(default=None, ge=0)
    # Inference cost: what predicting 1,000 new rows takes this model (all its fold models; an ensemble's members).
    predict_ms_per_1000_rows: float | None = Field(default=None, ge=0)
    gpus: float | None = Field(default=None, ge=0)
    device: str | None = None
    fallback: bool = False  # trained on CPU because onGpuUnavailable: FallbackToCPU found no GPU
    reason: str | None = None  # why a Failed/Skipped row has no score

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ModelResult:
        """A leaderboard row (LEADERBOARD_COLUMNS) as the summary's row."""
        values = {f: row.get(column) for f, column in COLUMN_OF.items()}
        values["device"] = values["device"] or None  # the ensemble ran on every device of its members
        values["reason"] = (values["reason"] or None) if values["state"] != "Succeeded" else None
        return cls.model_validate(values)


# Each field's leaderboard column.
COLUMN_OF: Mapping[str, str] = {
    "name": "model",
    "state": "state",
    "score_val": "score_val",
    "score_test": "score_test",
    "fit_seconds": "fit_time",
    "predict_ms_per_1000_rows": "predict_ms_per_1000_rows",
    "gpus": "gpus",
    "device": "device",
    "fallback": "fallback",
    "reason": "note",
}
# What status.models[] leaves out of a row, and why.
NOT_IN_STATUS: Mapping[str, str] = {
    "fallback": "status.fallbacks counts the models with a fold trained on the CPU",
    "reason": "a row's reason stays in the run's leaderboard; a failed job's conditions say why",
}


class RunSummary(_ResultsModel):
    """The job's outcome in a few hundred bytes; rows are best first and trimmed from the end to fit 4 KiB."""

    best_model: str | None = None
    score: float | None = None
    score_test: float | None = None
    eval_metric: str | None = None
    fits_total: int = Field(default=0, ge=0)
    fits_done: int = Field(default=0, ge=0)
    fits_failed: int = Field(default=0, ge=0)
    fits_skipped: int = Field(default=0, ge=0)
    fallbacks: int = Field(default=0, ge=0)
    error: str | None = None  # the job could not run at all (bad data, bad plan): one line a person can act on
    # Why, in a word the status shows as the Failed condition's reason (ERROR_REASONS says which are retried).
    error_reason: ErrorReason | None = None
    export_path: str | None = None  # where spec.export's serving export was written (status.exportPath)
    output_uri: str | None = None  # the committed run in object storage (status.outputUri)
    models: list[ModelResult] = Field(default_factory=list)

    def for_termination(self) -> str:
        """This summary as a termination message: scores rounded for `kubectl get tj`, rows dropped until it fits."""
        rounded = self.model_copy(
            update={
                "score": round_or_none(self.score),
                "score_test": round_or_none(self.score_test),
                "error": self.error[:1000] if self.error else None,
                "models": [
                    m.model_copy(
                        update={
                            "score_val": round_or_none(m.score_val),
                            "score_test": round_or_none(m.score_test),
                            "fit_seconds": round_or_none(m.fit_seconds),
                            "predict_ms_per_1000_rows": round_or_none(m.predict_ms_per_1000_rows),
                            "reason": m.reason[:200] if m.reason else None,
                        }
                    )
                    for m in self.models
                ],
            }
        )
        rows = list(rounded.models)
        while True:
            text = rounded.model_copy(update={"models": rows}).to_json()
            if len(text.encode()) <= TERMINATION_LIMIT or not rows:
                return text
            rows.pop()


class ProgressSnapshot(_ResultsModel):
    """Rank 0's live counters; bestScore is the best single fit's validation score so far."""

    fits_total: int = Field(ge=0)
    fits_done: int = Field(default=0, ge=0)
    fits_failed: int = Field(default=0, ge=0)
    fits_skipped: int = Field(default=0, ge=0)
    best_model: str | None = None
    best_score: float | None = None


class DataSummary(_ResultsModel):
    """The prepared training data in numbers, as a JobStarted event and preprocessing.json show it."""

    rows: int = Field(ge=0)
    features: int = Field(ge=0)
    categorical: int = Field(ge=0)
    problem_type: str
    classes: int = Field(ge=0)
    eval_metric: str
    test_rows: int = Field(default=0, ge=0)
    # How the ranks read the table: "sharded" (each rank its share) or "whole: <why>" (docs/sharding.md).
    reading: str | None = None
    rank_rows: list[int] | None = None  # read sharded: the rows each rank holds


class FitEvent(_ResultsModel):
    """One progress line. Fit events name the fit; FitEnded carries its state and, when it succeeded, its score."""

    t: float  # time.time() of the event, in seconds
    event: EventKind
    rank: int = Field(ge=0)  # the rank that wrote the line
    fit: str | None = None
    model: str | None = None  # the config the fit belongs to
    state: FitState | None = None  # FitEnded only
    seconds: float | None = Field(default=None, ge=0)  # the fit's training time
    score_val: float | None = None  # the fit's validation score (higher is better)
    device: str | None = None
    fallback: bool = False  # asked for a GPU, trained on the CPU (onGpuUnavailable: FallbackToCPU)
    rows_per_second: float | None = Field(default=None, ge=0)
    message: str | None = None  # why a fit failed or was skipped
    fits: int | None = Field(default=None, ge=0)  # JobStarted: fits in the plan
    resumed: int | None = Field(default=None, ge=0)  # JobStarted: fits an earlier attempt finished
    world: int | None = Field(default=None, ge=1)  # JobStarted: ranks in the job
    data: DataSummary | None = None  # JobStarted
    best_model: str | None = None  # JobEnded
    score: float | None = None  # JobEnded: the best model's validation score

    @model_validator(mode="after")
    def _complete(self) -> FitEvent:
        if self.event.startswith("Fit") and not self.fit:
            raise ValueError(f"a {self.event} event names its fit")
        if (self.event == "FitEnded") != (self.state is not None):
            raise ValueError("a FitEnded event, and only it, carries the fit's state")
        return self

    def line(self) -> bytes:
        """The event as one JSON line, written whole in a single write."""
        return (self.to_json() + "\n").encode()


def parse_events(text: str) -> list[FitEvent]:
    """The events of progress.jsonl text; a last line without its newline is still being written and waits."""
    whole = text[: text.rfind("\n") + 1]
    return [FitEvent.model_validate_json(line) for line in whole.splitlines()]


def read_events(out: Path) -> list[FitEvent]:
    """Every event in ``out/progress.jsonl`` (none when there is no file yet)."""
    path = out / PROGRESS_FILE
    return parse_events(path.read_text()) if path.exists() else []


class LauncherExit(_ResultsModel):
    """The termination message of a pod whose torchrun exited non-zero before any trainer process started (its
    rendezvous failed), written by the pod's launcher (tabjob_trainer.launch) in place of a RunSummary: there is no
    verdict of the trainer's, so the failure is the infrastructure's and the operator retries it."""

    exit_code: int = Field(ge=1)
    log_tail: str | None = None  # torchrun's last lines of stderr: why it gave up

    def for_termination(self) -> str:
        return self.model_copy(update={"log_tail": self.log_tail[-1500:] if self.log_tail else None}).to_json()


class MemoryNote(_ResultsModel):
    """A trainer pod's termination message while it runs, when its pod has a memory limit: the planner's estimate
    of the pod's peak and what to change should the pod be killed for memory anyway (the operator's OutOfMemory
    message). Rank 0's RunSummary replaces it in rank 0's pod when the job ends; a reader that is not looking for
    it reads it as no message."""

    estimate_bytes: int = Field(ge=0)
    limit_bytes: int = Field(ge=0)
    advice: str = Field(min_length=1, max_length=1500)

    def for_termination(self) -> str:
        return self.to_json()


def round_or_none(value: float | None, digits: int = 5) -> float | None:
    return None if value is None else round(value, digits)
