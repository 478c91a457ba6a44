"""The model families, the metrics and the built-in datasets: each fact declared once, for both sides.

A leaf package: it imports nothing of tabjob but its own modules (model.py, the shape a family fills; the lists of
the libraries' parameter names; the networks' shared settings), needs neither torch nor the tree libraries, and
everything on the control side that lists a family, a metric or a dataset derives the list from here (the spec's
``models`` fields and their CEL rules, the plan's ``key`` type, the planner's resource checks and hyperparameters,
the search spaces, the AutoGluon import). A family's torch-free facts, its defaults included, are all here, so that
``tabjob plan`` shows what each fit trains with; its ``trainer_module`` holds what needs the library (fit, predict,
load). A new family is an entry here, its trainer module and, where its library has one, a list of parameter names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from tabjob.families.library_parameters import FOREST_PARAMETERS, KNEIGHBORS_PARAMETERS, REALMLP_PARAMETERS
from tabjob.families.lightgbm_parameters import LIGHTGBM_PARAMETERS
from tabjob.families.model import ModelFamily as ModelFamily
from tabjob.families.model import Parallelism as Parallelism
from tabjob.families.network_settings import LOOP_SETTINGS, TABM_AUTOGLUON_RENAMES, TABM_SETTINGS, Setting
from tabjob.families.tree_loop import CATBOOST_LOOP, COMPARE_LEVELS, LIGHTGBM_LOOP, TREE_STOPPING, XGBOOST_LOOP
from tabjob.families.xgboost_parameters import XGBOOST_PARAMETERS

GBM = ModelFamily(
    key="GBM",
    library="LightGBM",
    summary="LightGBM gradient-boosted trees",
    hyperparameters="LightGBM parameters",
    # LightGBM's socket data-parallel learner is CPU-only, and its GPU learners train on one device. Its loop's
    # settings (tree_loop.py) are read by tabjob's fit, never passed to LightGBM.
    parallelism=("single-device", "data-parallel"),
    multi_gpu_fit=False,
    wants_gpu=False,
    autogluon_names=("GBM", "LightGBM"),
    hyperparameter_names=LIGHTGBM_PARAMETERS | frozenset(LIGHTGBM_LOOP),
    loop_settings=LIGHTGBM_LOOP,
    defaults={
        "learning_rate": 0.05,
        "num_leaves": 31,
        "feature_fraction": 0.9,
        "min_data_in_leaf": 20,
        "num_boost_round": 1000,
        **TREE_STOPPING,
        "max_native_levels": 32,  # a column with more levels reaches LightGBM as ordinal codes (models/gbm.py)
        COMPARE_LEVELS: True,  # ... unless all as sets or all as codes scores better on the fold's validation rows
    },
    trainer_module="tabjob_trainer.models.gbm",
    gpu_backends=("cuda", "opencl"),
    needs_torch=False,
    curve_unit="boosting round",
    importance="gain",
    colour="#2a9d8f",
    refit_iterations="num_boost_round",
    refit_settings={"early_stopping_rounds": 0, COMPARE_LEVELS: False},  # a refit has no validation rows to compare on
    shards=True,
    memory_per_byte=1.5,  # measured 1.20x reading whole (bench/sharded_memory.py), with a margin
    sharded_memory_per_byte=2.25,  # measured 1.88x on a shard
    floor=(
        "GBM_Plain",
        {
            "learning_rate": 0.1,
            "num_leaves": 31,
            "feature_fraction": 1.0,
            "min_data_in_leaf": 20,
            "num_boost_round": 100,
            "early_stopping_rounds": 0,
            "max_native_levels": 0,  # LightGBM's defaults on the plain matrix, every column a number, as measured
            COMPARE_LEVELS: False,
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
        # Epochs without a gain, + adaptive_patience x the best; half AutoGluon's 20 + 0.5x: as good, a third the time.
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
        "gradient_clip": 0.0,
    },
    trainer_module="tabjob_trainer.models.mlp",
    gpu_backends=("cuda",),
    needs_torch=True,
    curve_unit="epoch",
    importance="permutation",
    colour="#e76f51",
    refit_iterations="num_epochs",
    refit_replaces_bag=False,  # a bag of k networks is an ensemble, one refit is not (model.py)
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
    # DDP over the fit's ranks, as NN_TORCH; where one process holds the table, the k members share each batch.
    parallelism=("single-device", "data-parallel"),
    multi_gpu_fit=True,
    shards=True,
    wants_gpu=True,
    autogluon_names=("TABM", "TabM"),
    settings={
        **LOOP_SETTINGS,
        **TABM_SETTINGS,
    },
    defaults={
        # The loop's settings (NN_TORCH's defaults say what each means), at the TabM paper's values where it has them.
        "num_epochs": 1000,  # patience (or the config's time) ends it first
        "patience": 16,
        "adaptive_patience": 0.0,
        "lr_plateau": 0,
        "batch_size": "auto",  # the paper's batch for the training rows (tabm.py)
        "learning_rate": 2e-3,
        "weight_decay": 3e-4,
        "lr_scaling": "none",
        "skew_threshold": 0.0,  # every column with more than 10 distinct values is quantile-mapped
        "regression_loss": "mse",
        "amp": True,
        # The network: AutoGluon's TabM but 256 wide, a third of 512's time (BENCHMARKS.md, "Reading the peer figures").
        "k": 32,
        "d_block": 256,
        "n_blocks": 2,
        "dropout_prob": 0.1,
        "d_embedding": 16,
        "n_bins": 48,
        "arch_type": "tabm-mini",
        "share_batches": False,
        "gradient_clip": 1.0,
    },
    trainer_module="tabjob_trainer.models.tabm",
    gpu_backends=("cuda",),
    needs_torch=True,
    curve_unit="epoch",
    importance="permutation",
    colour="#8d6cab",
    refit_iterations="num_epochs",
    refit_replaces_bag=False,  # a bag of k networks is an ensemble, one refit is not (model.py)
    autogluon_renames=TABM_AUTOGLUON_RENAMES,
    portfolio=(("TABM", {}),),
    # Ahead of the trees' second configs it scored worse, ahead of the MLP's second alone no better (BENCHMARKS.md).
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
    loop_settings=CATBOOST_LOOP,
    defaults={
        "iterations": 10000,  # an upper bound: early stopping decides, as in AutoGluon's CatBoost
        "learning_rate": 0.05,
        "depth": 6,
        "l2_leaf_reg": 3.0,
        **TREE_STOPPING,
    },
    trainer_module="tabjob_trainer.models.cat",
    gpu_backends=("cuda",),
    needs_torch=False,
    curve_unit="boosting round",
    importance="gain",
    colour="#e9c46a",
    refit_iterations="iterations",
    refit_settings={"early_stopping_rounds": 0},
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
    memory_per_byte=2.0,  # measured 1.59x reading whole (bench/sharded_memory.py), with a margin
    sharded_memory_per_byte=2.25,  # measured 1.98x on a shard
    wants_gpu=False,
    autogluon_names=("XGB", "XGBoost"),
    hyperparameter_names=XGBOOST_PARAMETERS | frozenset(XGBOOST_LOOP),  # and the keys tabjob's fit loop reads
    loop_settings=XGBOOST_LOOP,
    autogluon_renames=(("n_estimators", "num_boost_round"),),  # AutoGluon fits XGBoost's scikit-learn model
    defaults={
        "num_boost_round": 10000,  # an upper bound: early stopping decides
        **TREE_STOPPING,
        "learning_rate": 0.1,
        "max_depth": 6,
        "enable_categorical": True,
        "max_native_levels": 32,  # a column with more levels reaches XGBoost as ordinal codes (models/xgb.py) ...
        COMPARE_LEVELS: True,  # ... unless every column as sets scores better on the fold's validation rows
        "max_cat_to_onehot": 4,
    },
    trainer_module="tabjob_trainer.models.xgb",
    gpu_backends=("cuda",),
    needs_torch=False,
    curve_unit="boosting round",
    importance="gain",
    colour="#264653",
    refit_iterations="num_boost_round",
    refit_settings={"early_stopping_rounds": 0, COMPARE_LEVELS: False},  # the way most folds kept (trainer refit.py)
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


def _forest(key: str, library: str, summary: str, colour: str, autogluon: tuple[str, ...]) -> ModelFamily:
    return ModelFamily(
        key=key, library=library, summary=summary, hyperparameters="scikit-learn forest parameters",
        parallelism=("single-device",), multi_gpu_fit=False, wants_gpu=False,  # the fit's threads; no GPU learner
        autogluon_names=autogluon, hyperparameter_names=FOREST_PARAMETERS,
        # AutoGluon's. Without criterion or max_features scikit-learn chooses each by the problem (gini and the
        # square root of the columns for a classifier, squared error and every column for a regressor), as it does.
        defaults={"n_estimators": 300, "max_leaf_nodes": 15000, "min_samples_leaf": 1},
        trainer_module=f"tabjob_trainer.models.{key.lower()}", gpu_backends=(), needs_torch=False,
        curve_unit="tree", importance="gain", colour=colour, portfolio=((key, {}),),
        search_space={"max_features": {"uniform": [0.3, 1.0]}, "min_samples_leaf": {"int": [1, 8]},
                      "max_leaf_nodes": {"int": [2000, 20000]}},
        in_presets=False,
    )  # fmt: skip


RF = _forest("RF", "scikit-learn RandomForest", "scikit-learn random forest: bootstrapped trees grown on random "
             "column subsets, their predictions averaged", "#6a994e", ("RF", "RandomForest"))  # fmt: skip
XT = _forest("XT", "scikit-learn ExtraTrees", "scikit-learn extremely randomized trees: every split threshold drawn "
             "at random, on all the rows", "#a7c957", ("XT", "ExtraTrees"))  # fmt: skip

KNN = ModelFamily(
    key="KNN",
    library="scikit-learn KNeighbors",
    summary="k nearest neighbours over the standardized numeric columns (string columns left out, as AutoGluon's)",
    hyperparameters="scikit-learn KNeighbors parameters",
    parallelism=("single-device",),
    multi_gpu_fit=False,
    wants_gpu=False,
    autogluon_names=("KNN", "KNeighbors"),
    hyperparameter_names=KNEIGHBORS_PARAMETERS,
    defaults={"n_neighbors": 5, "weights": "uniform"},
    trainer_module="tabjob_trainer.models.knn",
    gpu_backends=(),
    needs_torch=False,
    curve_unit="fit",
    importance="permutation",
    colour="#bc6c25",
    portfolio=(("KNN", {}), ("KNN_Dist", {"weights": "distance"})),
    search_space={"n_neighbors": {"int": [3, 50]}, "weights": {"choice": ["uniform", "distance"]}},
    in_presets=False,
)

REALMLP = ModelFamily(
    key="REALMLP",
    library="RealMLP (pytabkit)",
    summary="RealMLP from its authors' pytabkit: an MLP with robust scaling and smooth clipping of the numeric "
    "columns, periodic embeddings, parametric activations and a tuned schedule (RealMLP-TD's defaults); the best "
    "epoch on the validation rows is kept",
    hyperparameters="pytabkit RealMLP parameters",
    parallelism=("single-device",),
    multi_gpu_fit=False,
    wants_gpu=True,
    autogluon_names=("REALMLP", "RealMLP"),
    hyperparameter_names=REALMLP_PARAMETERS,
    # RealMLP-TD's own defaults (pytabkit's DefaultParams) apply to what is not set; its schedule spans n_epochs.
    defaults={"n_epochs": 256},
    trainer_module="tabjob_trainer.models.realmlp",
    gpu_backends=("cuda",),
    needs_torch=True,
    curve_unit="epoch",
    importance="permutation",
    colour="#3a86ff",
    portfolio=(("REALMLP", {}),),
    # A refit keeps the whole schedule (n_epochs) and stops at the bag's mean best epoch, as pytabkit's own refit.
    refit_iterations="stop_epoch",
    refit_replaces_bag=False,  # a bag of k networks is an ensemble, one refit is not (model.py)
    cpu_turns_late=1,
    search_space={
        "lr": {"logUniform": [0.02, 0.1]},
        "p_drop": {"choice": [0.0, 0.15, 0.3]},
        "wd": {"choice": [0.0, 0.02]},
        "n_hidden_layers": {"int": [2, 4]},
        "hidden_width": {"choice": [256, 512]},
    },
    in_presets=False,
)

FAMILIES: Mapping[str, ModelFamily] = {f.key: f for f in (GBM, CAT, XGB, NN_TORCH, TABM, RF, XT, KNN, REALMLP)}
MODEL_KEYS: tuple[str, ...] = tuple(FAMILIES)
# The same keys as a type, for models that carry one (plan_model.FitPlan.key); checked against FAMILIES below.
ModelKey = Literal["GBM", "CAT", "XGB", "NN_TORCH", "TABM", "RF", "XT", "KNN", "REALMLP"]
assert get_args(ModelKey) == MODEL_KEYS, "ModelKey must list the keys of FAMILIES, in order"


def family(key: str) -> ModelFamily:
    """The family for a spec key; an unknown key is an error naming the known ones."""
    if key not in FAMILIES:
        raise KeyError(f"unknown model key {key!r}; known keys: {', '.join(MODEL_KEYS)}")
    return FAMILIES[key]


# ---------------------------------------------------------------------------------------------- presets
PRESETS = ("medium", "high", "best")  # after AutoGluon's medium/high/best_quality (planner/presets.py)

# ---------------------------------------------------------------------------------------------- metrics
# spec.data.evalMetric's names, which the trainer scores by; all higher-is-better as reported (errors negated).
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
