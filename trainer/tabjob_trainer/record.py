"""A fit's record: what ``fits/<id>/result.json`` holds and what travels between ranks with the fit's files.

One typed model, camelCase on disk like the wire models in ``tabjob.contracts.results``, and the same state vocabulary
(``FitState``: Succeeded, Failed, Skipped). Written by ``fitting``, read by the store, the leaderboard and the report.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tabjob.contracts.plan import FitPlan
from tabjob.contracts.results import FitState


class FitRecord(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", allow_inf_nan=False)

    # The planned fit.
    id: str = Field(min_length=1)
    model: str  # the config's name
    key: str  # the model family
    order: int = Field(ge=0)
    trial: int = Field(ge=0)
    bag_set: int = Field(ge=0)
    fold: int | None = None  # None: no bagging
    rank: int = Field(ge=0)
    ranks: list[int]
    gpus: float = Field(ge=0)
    cpus: int = Field(ge=0)
    processes: int = Field(ge=1)
    hyperparameters: dict[str, Any]
    # What happened.
    state: FitState
    device: str = ""  # what it trained on: "cpu", "cuda:0", "gpu:0"; empty when it never started
    fallback: bool = False  # asked for a GPU, trained on the CPU (onGpuUnavailable: FallbackToCPU)
    note: str | None = None  # shown on the leaderboard: a fallback's reason, a refit's reason
    error_class: str | None = None  # Failed: the exception's class
    message: str | None = None  # Failed or Skipped: why, in one line
    traceback: str | None = None
    fit_time: float = Field(default=0.0, ge=0)
    # The kept model's own training seconds where the fit trained several and kept one (GBM's and XGB's ways of
    # splitting string columns); None: fit_time is the kept model's.
    kept_fit_time: float | None = Field(default=None, ge=0)
    pred_time_val: float = Field(default=0.0, ge=0)
    score_val: float | None = None
    score_test: float | None = None
    rows_train: int | None = None
    rows_val: int | None = None
    rows_per_second: float | None = None
    best_iteration: int | None = None
    settings_chosen: dict[str, Any] = Field(default_factory=dict)  # Trained.settings_chosen: over hyperparameters
    curve: dict[str, Any] = Field(default_factory=dict)  # {"metric": name, "train": [...], "val": [...]}
    importance: dict[str, float] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)
    fingerprint: dict[str, str] | None = None  # fingerprint.fit_fingerprint of the inputs it was trained on

    @classmethod
    def planned(cls, fit: FitPlan, state: FitState, **outcome: Any) -> FitRecord:
        """The record of a planned fit with what became of it."""
        return cls(
            id=fit.id,
            model=fit.model,
            key=fit.key,
            order=fit.order,
            trial=fit.trial,
            bag_set=fit.bag_set,
            fold=fit.fold,
            rank=fit.rank,
            ranks=list(fit.ranks),
            gpus=fit.gpus,
            cpus=fit.cpus,
            processes=fit.processes,
            hyperparameters=dict(fit.hyperparameters),
            state=state,
            **outcome,
        )

    @property
    def succeeded(self) -> bool:
        return self.state == "Succeeded"

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True, indent=1)
