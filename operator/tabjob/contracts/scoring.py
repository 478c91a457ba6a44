"""What a scoring pod reports back: the contract between a TabularPrediction's pods and the operator.

Two messages cross that boundary, typed as ``results`` types the trainer's (camelCase on the wire, no NaN):

- ``ScoringProgress``: what each scoring pod serves on its progress port while it scores (``status.pods``, the rows
  scored, rows per second and the ETA).
- ``ScoringSummary``: the pod's termination message when it ends, the same counters plus its verdict: a preflight
  refusal (``error_reason``, one of ``PREFLIGHT_REASONS``: the whole TabularPrediction fails before any shard is
  scored), or the shards that failed on their rows (``failures``, the others scored and committed).

The operator never reads the bucket (it has no credentials), so these two are all it knows of the scoring.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tabjob.contracts.results import TERMINATION_LIMIT

# Why a scoring pod could not score at all. Each but OutputUnavailable fails the TabularPrediction at once: asking
# again meets the same refusal (a run that is not committed, columns the model needs that the data lacks, ...).
ScoringReason = Literal[
    "ModelNotReady",  # the run is not committed (_COMMITTED.json missing) or unreadable
    "MissingColumns",  # the dataset lacks a feature column the model needs, or a passthrough column
    "NoData",  # the data prefix holds no data files, or no rows
    "OutputExists",  # the output holds a finished result (or another prediction's parts) and overwrite is false
    "InvalidData",  # a file that cannot be read as its format, files that disagree on their columns
    "DataUnavailable",  # the store refused or failed the input (credentials, a missing bucket)
    "OutputUnavailable",  # a part or the success marker could not be written: retried, the pod resumes
]
RETRIED_REASONS: tuple[str, ...] = ("OutputUnavailable",)
MAX_FAILURES = 8  # shard failures a summary carries; the count says how many there were in all


class _ScoringModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
    )

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)


class ShardFailure(_ScoringModel):
    """One shard that could not be scored, with the first row and column its values failed on."""

    shard: int = Field(ge=0)
    error: str = Field(max_length=600)


class ScoringProgress(_ScoringModel):
    """One pod's counters. ``planShards``/``planRows`` are the whole prediction's (every pod knows the plan), so the
    operator has the total as soon as any pod reports; ``planRows`` is None for CSV data (rows unknown unread)."""

    pod: int = Field(ge=0)
    plan_shards: int = Field(default=0, ge=0)
    plan_rows: int | None = Field(default=None, ge=0)
    shards_total: int = Field(default=0, ge=0)  # this pod's share
    shards_done: int = Field(default=0, ge=0)  # scored and committed now, or found committed (skipped)
    shards_skipped: int = Field(default=0, ge=0)  # committed by an earlier pod: not scored again
    shards_failed: int = Field(default=0, ge=0)
    rows_done: int = Field(default=0, ge=0)  # rows of the done shards, skipped ones included
    rows_scored: int = Field(default=0, ge=0)  # rows this pod scored itself (the rate's numerator)
    seconds_scoring: float = Field(default=0.0, ge=0)  # since this pod began its first shard
    seconds_predicting: float = Field(default=0.0, ge=0)  # of those, in the Predictor (the rest: reads, writes)


class ScoringSummary(ScoringProgress):
    """A pod's last word, as its termination message."""

    error: str | None = None
    error_reason: ScoringReason | None = None
    failures: list[ShardFailure] = Field(default_factory=list)
    success_marker: bool = False  # this pod saw every shard committed and wrote (or found) _SUCCESS

    def for_termination(self) -> str:
        """Under Kubernetes' 4 KiB: the error cut to 1,000 characters, failures dropped from the end."""
        short = self.model_copy(update={"error": self.error[:1000] if self.error else None})
        failures = list(short.failures[:MAX_FAILURES])
        while True:
            text = short.model_copy(update={"failures": failures}).to_json()
            if len(text.encode()) <= TERMINATION_LIMIT or not failures:
                return text
            failures.pop()
