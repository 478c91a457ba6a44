"""The model families, the metrics and the built-in datasets: each fact declared once, for both sides.

A leaf module: it imports nothing of tabjob, needs neither torch nor LightGBM, and everything on the control side
that lists a family, a metric or a dataset derives the list from here (the spec's ``models`` fields and their CEL
rules, the plan's ``key`` type, the planner's resource checks, the default search spaces, the AutoGluon import).
The trainer's registry (``tabjob_trainer.models.registry``) binds each key to the module that fits and loads it,
and its metrics and data readers use the names declared here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

Parallelism = Literal["single-device", "data-parallel"]


@dataclass(frozen=True)
class ModelFamily:
    """What the control side knows of one family: how it may be placed, how it is described, what it searches."""

    key: str  # the spec's key under spec.models, and the plan's FitPlan.key
    library: str  # what trains it, as error messages and the CRD name it
    summary: str
    hyperparameters: str  # what a config's hyperparameters are, for the CRD's description
    parallelism: tuple[Parallelism, ...]  # "data-parallel": one fit may span several ranks (processes > 1)
    multi_gpu_fit: bool  # a fit may hold more than one GPU (one per rank, DDP); False: a GPU fit is one device
    wants_gpu: bool  # trains much faster on a GPU: the planner warns when it gets none in a job that has some
    autogluon_names: tuple[str, ...]  # AutoGluon's hyperparameters keys `tabjob from-autogluon` maps to this family
    # The default tuning space, in the spec's spelling (tuning.searchSpace): AutoGluon's own spaces, narrowed.
    search_space: Mapping[str, Mapping[str, Any]]

    @property
    def data_parallel(self) -> bool:
        return "data-parallel" in self.parallelism


GBM = ModelFamily(
    key="GBM",
    library="LightGBM",
    summary="LightGBM gradient-boosted trees",
    hyperparameters="LightGBM parameters",
    # LightGBM's socket data-parallel learner is CPU-only, and its GPU learners train on one device.
    parallelism=("single-device", "data-parallel"),
    multi_gpu_fit=False,
    wants_gpu=False,
    autogluon_names=("GBM", "LightGBM"),
    search_space={
        "learning_rate": {"logUniform": [0.01, 0.2]},
        "num_leaves": {"int": [16, 96]},
        "feature_fraction": {"uniform": [0.75, 1.0]},
        "min_data_in_leaf": {"int": [2, 60]},
    },
)
NN_TORCH = ModelFamily(
    key="NN_TORCH",
    library="PyTorch MLP",
    summary="PyTorch MLP with categorical embeddings",
    hyperparameters="MLP settings",
    parallelism=("single-device", "data-parallel"),  # DistributedDataParallel over the fit's ranks
    multi_gpu_fit=True,
    wants_gpu=True,
    autogluon_names=("NN_TORCH", "NN"),
    search_space={
        "learning_rate": {"logUniform": [1e-4, 3e-2]},
        "dropout_prob": {"uniform": [0.0, 0.4]},
        "num_layers": {"int": [2, 4]},
        "hidden_size": {"choice": [128, 256, 512]},
        "weight_decay": {"logUniform": [1e-12, 1e-1]},
    },
)

FAMILIES: Mapping[str, ModelFamily] = {f.key: f for f in (GBM, NN_TORCH)}
MODEL_KEYS: tuple[str, ...] = tuple(FAMILIES)
# The same keys as a type, for models that carry one (plan_model.FitPlan.key); checked against FAMILIES below.
ModelKey = Literal["GBM", "NN_TORCH"]
assert get_args(ModelKey) == MODEL_KEYS, "ModelKey must list the keys of FAMILIES, in order"


def family(key: str) -> ModelFamily:
    """The family for a spec key; an unknown key is an error naming the known ones."""
    if key not in FAMILIES:
        raise KeyError(f"unknown model key {key!r}; known keys: {', '.join(MODEL_KEYS)}")
    return FAMILIES[key]


# ---------------------------------------------------------------------------------------------- metrics
# The names spec.data.evalMetric accepts, and the trainer scores by; every one is higher-is-better as reported
# (error metrics are negated, as AutoGluon does).
CLASSIFICATION_METRICS = ("accuracy", "balanced_accuracy", "roc_auc", "log_loss", "f1")
REGRESSION_METRICS = ("rmse", "mae", "r2")
ERROR_METRICS = ("log_loss", "rmse", "mae")  # lower is better before negation
METRICS = ("auto", *CLASSIFICATION_METRICS, *REGRESSION_METRICS)

# --------------------------------------------------------------------------------------------- datasets
# Datasets scikit-learn ships inside its wheel (sklearn://NAME): name -> problem type; the label is `target`.
BUILTIN_SCHEME = "sklearn://"
BUILTIN_LABEL = "target"
BUILTIN_DATASETS: Mapping[str, str] = {
    "breast_cancer": "binary",
    "wine": "multiclass",
    "iris": "multiclass",
    "diabetes": "regression",
}
