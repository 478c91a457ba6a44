"""The model families, the metrics and the built-in datasets: each fact declared once, for both sides.

A leaf module: it imports nothing of tabjob but the generated lists of LightGBM's and XGBoost's parameter names and
the networks' shared settings (leaves too), needs neither torch nor the tree libraries, and everything on the
control side that lists a family, a metric or a dataset derives the list from here (the spec's ``models`` fields and
their CEL rules, the plan's ``key`` type, the planner's resource checks and its hyperparameters, the default search
spaces, the AutoGluon import). A family's torch-free facts are all here, its defaults included, so that ``tabjob
plan`` shows what each fit trains with; its ``trainer_module`` holds only what needs the library (fit, predict,
load), and the trainer's registry finds it by that name. A new family is an entry here, its trainer module and, when
its library has one, a generated list of parameter names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from tabjob.families.lightgbm_parameters import LIGHTGBM_PARAMETERS
from tabjob.families.network_settings import LOOP_SETTINGS, Setting
from tabjob.families.xgboost_parameters import XGBOOST_PARAMETERS

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
    # What every config starts from; a config's own hyperparameters override them. The planner merges them into
    # each fit's hyperparameters (``effective``), so the plan, `tabjob plan` and the fit's record say what trained.
    defaults: Mapping[str, Any]
    trainer_module: str  # the trainer's module with its fit, predict and load, imported on first use
    gpu_backends: tuple[str, ...]  # what it can train on besides the CPU, in the order the trainer tries them
    needs_torch: bool  # a process must import torch to fit or load it
    curve_unit: str  # what one step of its learning curve is: "boosting round", "epoch"
    importance: Literal["gain", "permutation"]  # how the report measures its features' importance
    colour: str  # its colour in the report's charts
    # Named configurations a preset trains, strongest first: a time limit that runs out skips the later ones, so
    # the order is the priority. Taken from AutoGluon's 2023 zero-shot portfolio (the configs that won most often
    # across the TabRepo tables, found by greedy selection; the _rNNN names are its own), each family's first
    # entries, rounded.
    portfolio: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    # The library's own defaults (what a plain LGBMClassifier trains), trained first by every preset: with it in
    # the ensemble's pool the deployed model is chosen against it on the same out-of-fold rows.
    floor: tuple[str, Mapping[str, Any]] | None = None
    # Turns a preset delays this family's configs in a job without GPUs: its CPU fits cost several times the trees'
    # (TabM: 2-12x the MLP's on 2 CPUs), and a budget too short for every fit should reach the trees' second
    # configs first. With GPUs it takes its turn like the others.
    cpu_turns_late: int = 0
    # The only hyperparameter names its configs and search spaces may use: an unknown one is refused at plan time
    # instead of being silently ignored (tabjob's networks ignore it; LightGBM and XGBoost only warn, and train on).
    # None where the library refuses unknown names itself (CatBoost).
    # tests/trainer checks them against the defaults and the installed LightGBM and XGBoost.
    # A network family gives its settings instead, and its names are theirs.
    hyperparameter_names: frozenset[str] | None = None
    # tabjob's own networks: the values each setting takes, checked at plan time as well (the loop's are shared,
    # network_settings.py).
    settings: Mapping[str, Setting] | None = None
    # AutoGluon's names for settings this family has under another name, for `tabjob from-autogluon`.
    autogluon_renames: tuple[tuple[str, str], ...] = ()
    # A data-parallel fit of it trains on each rank's own share of the rows (sharded reading, docs/sharding.md):
    # each rank reads only its row groups. False: every rank that runs it reads the whole table.
    shards: bool = False
    # A rank's peak memory per byte of the rows it reads, as float64 (rows x columns x 8), at the fit's peak, beyond
    # the interpreter and the libraries: what the planner's memory check multiplies, reading whole and reading its
    # shard (measured by bench/sharded_memory.py, BENCHMARKS.md "Tables larger than one pod").
    memory_per_byte: float = 3.5
    sharded_memory_per_byte: float = 3.5

    def __post_init__(self) -> None:
        if self.settings is not None:
            object.__setattr__(self, "hyperparameter_names", frozenset(self.settings))

    @property
    def data_parallel(self) -> bool:
        return "data-parallel" in self.parallelism

    def effective(self, hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
        """What a fit trains with: the defaults under a config's (or a trial's) own hyperparameters."""
        return {**self.defaults, **hyperparameters}


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
    hyperparameter_names=LIGHTGBM_PARAMETERS,  # num_boost_round and early_stopping_rounds are LightGBM's aliases
    defaults={
        "learning_rate": 0.05,
        "num_leaves": 31,
        "feature_fraction": 0.9,
        "min_data_in_leaf": 20,
        "num_boost_round": 1000,
        "early_stopping_rounds": 50,
    },
    trainer_module="tabjob_trainer.models.gbm",
    gpu_backends=("cuda", "opencl"),
    needs_torch=False,
    curve_unit="boosting round",
    importance="gain",
    colour="#2a9d8f",
    shards=True,
    floor=(
        "GBM_Plain",
        {
            "learning_rate": 0.1,
            "num_leaves": 31,
            "feature_fraction": 1.0,
            "min_data_in_leaf": 20,
            "num_boost_round": 100,
            "early_stopping_rounds": 0,
        },
    ),
    portfolio=(
        ("GBM", {}),
        ("GBM_XT", {"extra_trees": True}),
        ("GBM_Large", {"learning_rate": 0.03, "num_leaves": 128, "feature_fraction": 0.9, "min_data_in_leaf": 3}),
        ("GBM_r131", {"learning_rate": 0.012, "num_leaves": 53, "feature_fraction": 0.70, "min_data_in_leaf": 14}),
        (
            "GBM_r191",
            {
                "extra_trees": True,
                "learning_rate": 0.051,
                "num_leaves": 167,
                "feature_fraction": 0.90,
                "min_data_in_leaf": 18,
            },
        ),
    ),
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
    shards=True,
    wants_gpu=True,
    autogluon_names=("NN_TORCH", "NN"),
    settings={
        **LOOP_SETTINGS,
        "hidden_size": Setting("int", minimum=1),
        "num_layers": Setting("int", minimum=1),
        "max_embedding_dim": Setting("int", minimum=1),
    },
    defaults={
        "num_epochs": 200,
        # Epochs without improvement before stopping, plus adaptive_patience x the best epoch. AutoGluon waits
        # 20 + 0.5x; half that measured the same validation scores here in a third of the time.
        "patience": 10,
        "adaptive_patience": 0.25,
        "lr_plateau": 8,  # epochs without improvement before the learning rate is halved; 0 keeps it fixed
        "batch_size": "auto",  # 2^(3 + floor(log10(rows))), at most 512: AutoGluon's rule
        "learning_rate": 1e-3,
        "weight_decay": 1e-5,
        "hidden_size": 128,
        "num_layers": 4,
        "dropout_prob": 0.1,
        "lr_scaling": "sqrt",
        "max_embedding_dim": 16,
        "skew_threshold": 0.99,
        "regression_loss": "huber",  # huber, mse or l1 on the standardised target
        "amp": True,
    },
    trainer_module="tabjob_trainer.models.mlp",
    gpu_backends=("cuda",),
    needs_torch=True,
    curve_unit="epoch",
    importance="permutation",
    colour="#e76f51",
    portfolio=(
        ("NN_TORCH", {}),
        (
            "NN_TORCH_r79",
            {
                "hidden_size": 108,
                "num_layers": 4,
                "dropout_prob": 0.10,
                "learning_rate": 0.0027,
                "weight_decay": 1.4e-12,
            },
        ),
    ),
    search_space={
        "learning_rate": {"logUniform": [1e-4, 3e-2]},
        "dropout_prob": {"uniform": [0.0, 0.4]},
        "num_layers": {"int": [2, 4]},
        "hidden_size": {"choice": [128, 256, 512]},
        "weight_decay": {"logUniform": [1e-12, 1e-1]},
    },
)

TABM = ModelFamily(
    key="TABM",
    library="TabM (PyTorch)",
    summary="TabM: k MLPs trained as one, sharing their weights (BatchEnsemble), over piecewise-linear numeric "
    "embeddings; predictions are the mean of the k",
    hyperparameters="TabM settings",
    # DistributedDataParallel over the fit's ranks, as NN_TORCH; on tables that fit one process the k members
    # already share each batch and one process is the better use of the CPUs.
    parallelism=("single-device", "data-parallel"),
    multi_gpu_fit=True,
    shards=True,
    wants_gpu=True,
    autogluon_names=("TABM", "TabM"),
    settings={
        **LOOP_SETTINGS,
        "k": Setting("int", minimum=1),
        "d_block": Setting("int", minimum=1),
        "n_blocks": Setting("int", minimum=1),
        "d_embedding": Setting("int", minimum=1),
        "n_bins": Setting("int", minimum=2),  # piecewise-linear encoding needs two edges per column
    },
    defaults={
        # The loop's settings (NN_TORCH's defaults say what each means), at the TabM paper's values where it has them.
        "num_epochs": 200,
        "patience": 16,
        "adaptive_patience": 0.0,
        "lr_plateau": 0,
        "batch_size": "auto",
        "learning_rate": 2e-3,
        "weight_decay": 3e-4,
        "lr_scaling": "none",
        "skew_threshold": 0.0,  # every column with more than 10 distinct values is quantile-mapped
        "regression_loss": "mse",
        "amp": True,
        # The network.
        "k": 16,  # members; the paper's 32 costs twice the time for little more on small tables
        "d_block": 256,
        "n_blocks": 2,
        "dropout_prob": 0.1,
        "d_embedding": 16,
        "n_bins": 48,
    },
    trainer_module="tabjob_trainer.models.tabm",
    gpu_backends=("cuda",),
    needs_torch=True,
    curve_unit="epoch",
    importance="permutation",
    colour="#8d6cab",
    autogluon_renames=(
        ("tabm_k", "k"),
        ("lr", "learning_rate"),
        ("dropout", "dropout_prob"),
        ("num_emb_n_bins", "n_bins"),
        ("n_epochs", "num_epochs"),
        ("allow_amp", "amp"),
    ),
    portfolio=(("TABM", {}),),
    # On 15,000 rows and 2 CPUs its 8 folds took most of a 300 s budget ahead of the trees' second round, and the
    # run scored below AutoGluon's there.
    cpu_turns_late=1,
    search_space={
        "learning_rate": {"logUniform": [3e-4, 5e-3]},
        "dropout_prob": {"uniform": [0.0, 0.3]},
        "n_blocks": {"int": [1, 3]},
        "d_block": {"choice": [128, 256, 512]},
        "weight_decay": {"logUniform": [1e-5, 1e-2]},
    },
)

CAT = ModelFamily(
    key="CAT",
    library="CatBoost",
    summary="CatBoost gradient-boosted oblivious trees with ordered target statistics for string columns",
    hyperparameters="CatBoost parameters",
    parallelism=("single-device",),  # CatBoost has no multi-process learner tabjob could join ranks to
    multi_gpu_fit=False,
    wants_gpu=False,
    autogluon_names=("CAT", "CatBoost"),
    defaults={
        "iterations": 10000,  # an upper bound: early stopping decides, as in AutoGluon's CatBoost
        "learning_rate": 0.05,
        "depth": 6,
        "l2_leaf_reg": 3.0,
        "early_stopping_rounds": 50,
    },
    trainer_module="tabjob_trainer.models.cat",
    gpu_backends=("cuda",),
    needs_torch=False,
    curve_unit="boosting round",
    importance="gain",
    colour="#e9c46a",
    portfolio=(
        ("CAT", {}),
        (
            "CAT_r177",
            {"depth": 6, "l2_leaf_reg": 2.15, "learning_rate": 0.069, "max_ctr_complexity": 4, "one_hot_max_size": 10},
        ),
        (
            "CAT_r9",
            {
                "depth": 8,
                "grow_policy": "Depthwise",
                "l2_leaf_reg": 2.8,
                "learning_rate": 0.031,
                "max_ctr_complexity": 2,
                "one_hot_max_size": 3,
            },
        ),
    ),
    search_space={
        "learning_rate": {"logUniform": [0.01, 0.2]},
        "depth": {"int": [4, 8]},
        "l2_leaf_reg": {"uniform": [1.0, 5.0]},
        "max_ctr_complexity": {"int": [1, 5]},
        "one_hot_max_size": {"choice": [2, 3, 5, 10]},
    },
)
XGB = ModelFamily(
    key="XGB",
    library="XGBoost",
    summary="XGBoost histogram gradient-boosted trees with native categorical splits",
    hyperparameters="XGBoost parameters",
    # XGBoost's collective (its tracker on the fit's first rank), on the CPU or on one GPU per rank (NCCL).
    parallelism=("single-device", "data-parallel"),
    multi_gpu_fit=True,
    shards=True,
    wants_gpu=False,
    autogluon_names=("XGB", "XGBoost"),
    # XGBoost's own names, and the three tabjob's fit loop reads (the rounds, early stopping, categorical splits).
    hyperparameter_names=XGBOOST_PARAMETERS | {"num_boost_round", "early_stopping_rounds", "enable_categorical"},
    autogluon_renames=(("n_estimators", "num_boost_round"),),  # AutoGluon fits XGBoost's scikit-learn model
    defaults={
        "num_boost_round": 10000,  # an upper bound: early stopping decides
        "early_stopping_rounds": 50,
        "learning_rate": 0.1,
        "max_depth": 6,
        "enable_categorical": True,
        "max_cat_to_onehot": 4,
    },
    trainer_module="tabjob_trainer.models.xgb",
    gpu_backends=("cuda",),
    needs_torch=False,
    curve_unit="boosting round",
    importance="gain",
    colour="#264653",
    portfolio=(
        ("XGB", {}),
        (
            "XGB_r33",
            {
                "learning_rate": 0.018,
                "max_depth": 10,
                "min_child_weight": 0.60,
                "colsample_bytree": 0.69,
                "enable_categorical": False,
            },
        ),
        (
            "XGB_r89",
            {
                "learning_rate": 0.088,
                "max_depth": 5,
                "min_child_weight": 0.63,
                "colsample_bytree": 0.66,
                "enable_categorical": False,
            },
        ),
    ),
    search_space={
        "learning_rate": {"logUniform": [0.01, 0.2]},
        "max_depth": {"int": [3, 10]},
        "min_child_weight": {"uniform": [0.5, 1.5]},
        "colsample_bytree": {"uniform": [0.5, 1.0]},
    },
)

FAMILIES: Mapping[str, ModelFamily] = {f.key: f for f in (GBM, CAT, XGB, NN_TORCH, TABM)}
MODEL_KEYS: tuple[str, ...] = tuple(FAMILIES)
# The same keys as a type, for models that carry one (plan_model.FitPlan.key); checked against FAMILIES below.
ModelKey = Literal["GBM", "CAT", "XGB", "NN_TORCH", "TABM"]
assert get_args(ModelKey) == MODEL_KEYS, "ModelKey must list the keys of FAMILIES, in order"


def family(key: str) -> ModelFamily:
    """The family for a spec key; an unknown key is an error naming the known ones."""
    if key not in FAMILIES:
        raise KeyError(f"unknown model key {key!r}; known keys: {', '.join(MODEL_KEYS)}")
    return FAMILIES[key]


# ---------------------------------------------------------------------------------------------- presets
# spec.preset's values, after AutoGluon's medium_quality, high_quality and best_quality (planner/presets.py).
PRESETS = ("medium", "high", "best")

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
