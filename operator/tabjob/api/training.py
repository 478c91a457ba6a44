"""What to train: model configs with their per-fit resources, bagging, the hyperparameter search, the ensemble."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    create_model,
    field_validator,
    model_validator,
)

from tabjob.api.base import (
    MAX_CPUS,
    MAX_GPUS,
    MAX_INT,
    MAX_LIST,
    ApiModel,
    Int,
    crd_string,
    is_valid_gpu_amount,
)
from tabjob.api.rules import _HYPERPARAMETERS, GPU_FRACTION_RULE
from tabjob.families import (
    FAMILIES,
    MODEL_KEYS,
)

_MODEL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,62}$")


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


# One optional list of configs per model family, named by its key (families/ holds the families).
_FAMILY_FIELDS: dict[str, Any] = {
    f.key: (
        list[ModelConfig] | None,
        Field(default=None, alias=f.key, max_length=MAX_LIST, description=f"{f.library} configs."),
    )
    for f in FAMILIES.values()
}
_FamilyConfigs: Any = create_model("_FamilyConfigs", __base__=ApiModel, **_FAMILY_FIELDS)


class ModelsSpec(_FamilyConfigs):  # its fields: one per family in families/
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


class StackingSpec(ApiModel):
    """A second layer trained on the base models' out-of-fold predictions (AutoGluon num_stack_levels), used only
    where a holdout shows it beats the base models' weighted ensemble (AutoGluon's dynamic stacking)."""

    levels: Int = Field(
        default=1,
        ge=0,
        le=1,
        description="Stack layers above the base models: 0 (off) or 1. A level needs out-of-fold predictions, so "
        "bagging.folds >= 2.",
    )
    holdout_fraction: float = Field(
        default=0.1,
        ge=0.05,
        le=0.5,
        description="Share of the training rows the guard holds out: the stack is trained on the other rows' "
        "out-of-fold predictions and used only if it scores above the base models' weighted ensemble on these.",
    )
    base_models: Int = Field(
        default=8,
        ge=1,
        le=63,
        description="How many base models (the best by validation score) the stack reads predictions of.",
    )


class EnsembleSpec(ApiModel):
    """Caruana weighted ensemble over out-of-fold or validation predictions."""

    size: Int = Field(default=25, ge=0, le=1000, description="Selection rounds; 0 turns the ensemble off.")
