"""What the trainer reports back: the contract between a trainer pod and the operator, beside ``plan_model.py``.

Two messages cross that boundary, each one typed model with one spelling (camelCase on the wire):

- ``RunSummary``: the short JSON rank 0 writes to the container's termination message (and ``tabjob run`` prints);
  the operator turns it into ``status.models``, ``bestModel`` and ``score``. A non-zero rank writes nothing, so the
  kubelet's ``FallbackToLogsOnError`` can still show a crashed rank's log tail.
- ``ProgressSnapshot``: what rank 0 serves on its progress port while the job runs (``status.progress``).

Both refuse non-finite numbers: a NaN score must never reach the API server, which rejects it and strands the job.
Writers build these models; readers call ``model_validate_json`` and treat a ``ValidationError`` as "no summary".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

TERMINATION_LIMIT = 4000  # Kubernetes keeps at most 4096 bytes of a termination message

FitState = Literal["Succeeded", "Failed", "Skipped"]


class _ResultsModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, allow_inf_nan=False
    )

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True, exclude_defaults=True)


class ModelResult(_ResultsModel):
    """One leaderboard row as status shows it: a bagged model, a trial, or the weighted ensemble."""

    name: str = Field(min_length=1)
    state: FitState
    score_val: float | None = None
    score_test: float | None = None
    fit_seconds: float | None = Field(default=None, ge=0)
    gpus: float | None = Field(default=None, ge=0)
    device: str | None = None
    fallback: bool = False  # trained on CPU because onGpuUnavailable: FallbackToCPU found no GPU
    reason: str | None = None  # why a Failed/Skipped row has no score


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
    export_path: str | None = None  # where spec.export's serving export was written (status.exportPath)
    models: list[ModelResult] = Field(default_factory=list)

    def for_termination(self) -> str:
        """This summary as a termination message: scores rounded for `kubectl get tj`, rows dropped until it fits."""
        rounded = self.model_copy(
            update={
                "score": _round(self.score),
                "score_test": _round(self.score_test),
                "error": self.error[:1000] if self.error else None,
                "models": [
                    m.model_copy(
                        update={
                            "score_val": _round(m.score_val),
                            "score_test": _round(m.score_test),
                            "fit_seconds": _round(m.fit_seconds),
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


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 5)
