"""The Plan: what the planner resolves a spec into, shared by the operator, the CLI and the trainer.

JSON keys are camelCase; ``pods``, ``worldSize``, ``concurrency``, ``peak``, ``requested``, ``fits`` (with
``model``, ``trial``, ``fold``, ``cpus``, ``gpus``, ``rank``, ``device``), ``warnings``, ``reading`` and ``memory``
are a contract. A fit's ``hyperparameters`` are what it trains with: its family's defaults under its config's (or
its trial's) own.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tabjob.families import ModelKey


class _PlanModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class PodPlan(_PlanModel):
    name: str
    cpus: int
    gpus: int
    memory: str | None = None
    procs: int
    first_rank: int


class Amount(_PlanModel):
    cpus: int
    gpus: float


class ConcurrencyPlan(_PlanModel):
    trials: int
    folds: int
    fits: int


class ConfigPlan(_PlanModel):
    """One model config: its per-fit resources and how many of its fits run at once."""

    name: str
    key: ModelKey
    order: int
    field: str  # where it came from, e.g. spec.models.<key>[1]
    cpus: int  # per fit, total over its processes
    gpus: float  # per fit, total over its processes
    processes: int
    trials_parallel: int
    folds_parallel: int
    slots: int
    fits: int
    peak: Amount


class FitPlan(_PlanModel):
    """One fit: a (config, trial, bag set, fold) with its place among the ranks."""

    id: str
    model: str
    key: ModelKey
    order: int
    trial: int
    bag_set: int
    fold: int | None  # None: no bagging; the trainer holds out a stratified validation split
    cpus: int
    gpus: float
    processes: int
    rank: int
    ranks: list[int]
    device: str  # "cpu" or "cuda:<local index>" of the first rank
    slot: int
    hyperparameters: dict[str, Any] = Field(default_factory=dict)  # the family's defaults included
    seed: int = 0


class StackPlan(_PlanModel):
    """The stack layer (spec.stacking, or the preset's): trained by rank 0 once the base models are done."""

    levels: int
    holdout_fraction: float
    base_models: int
    # Seconds of timeLimitSeconds kept from the base models for the stack's guard and fits (0 without a limit).
    reserve_seconds: float = 0.0


class RefitPlan(_PlanModel):
    """Refitting the deployed model on every row (spec.refitFull, or the preset's): done by rank 0 at the end."""

    holdout_fraction: float  # share of the training rows the guard holds out to choose between refit and bag
    max_models: int  # refit models the leaderboard has room for (the ensemble's own _FULL row included)
    # Seconds of timeLimitSeconds kept from the base models (and the stack) for the refit (0 without a limit).
    reserve_seconds: float = 0.0


class ReadingPlan(_PlanModel):
    """How the ranks read the training table (docs/sharding.md): ``sharded``, each rank only its share of the
    row groups, or ``whole``, every rank all of it, ``reason`` saying why."""

    mode: Literal["sharded", "whole"] = "whole"
    reason: str = ""


class MemoryPlan(_PlanModel):
    """The planner's estimate of each pod's peak memory, from the table's metadata (when it could read them):
    ``tabjob validate`` refuses a plan whose pod would not fit its memory limit."""

    rows: int | None  # None for CSV (counting its rows means reading it)
    columns: int
    table_bytes: int  # the table as float64 (rows x columns x 8), or as stored when larger (strings)
    pod_bytes: list[int]  # each pod's estimated peak, in plan.pods order
    pod_limits: list[int | None]  # each pod's memory limit (None: no limit, nothing to compare)


class Plan(_PlanModel):
    job_name: str
    pods: list[PodPlan]
    world_size: int
    concurrency: ConcurrencyPlan
    peak: Amount
    requested: Amount
    fits: list[FitPlan]
    warnings: list[str] = Field(default_factory=list)
    configs: list[ConfigPlan]
    folds: int
    sets: int
    ensemble_size: int
    time_limit_seconds: int | None = None
    preset: str | None = None  # the preset that filled spec.models or spec.bagging, if one did
    infer_limit_ms_per1000_rows: float | None = Field(default=None, alias="inferLimitMsPer1000Rows")
    stacking: StackPlan | None = None  # None: no stack layer
    refit: RefitPlan | None = None  # None: the bags are deployed as they are
    on_gpu_unavailable: Literal["Fail", "FallbackToCPU"] = "Fail"
    gpu_resource: str = "nvidia.com/gpu"
    reading: ReadingPlan = Field(default_factory=ReadingPlan)  # an older plan without it: every rank reads whole
    memory: MemoryPlan | None = None  # None: the planner was not given the table's metadata

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_json_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls.model_validate(json.loads(text))

    def fits_for_rank(self, rank: int) -> list[FitPlan]:
        """Fits whose ranks include ``rank``, in the order they are to run."""
        return [f for f in self.fits if rank in f.ranks]

    def pod_of_rank(self, rank: int) -> PodPlan:
        for pod in self.pods:
            if pod.first_rank <= rank < pod.first_rank + pod.procs:
                return pod
        raise IndexError(f"rank {rank} is outside the plan's world of {self.world_size}")
