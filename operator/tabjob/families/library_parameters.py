"""The parameter names scikit-learn's forests and neighbours and pytabkit's RealMLP take that a config may set.

Written out, not read from the libraries (the control side never imports them); tests/trainer/test_new_families.py
checks them against the installed scikit-learn and pytabkit. What tabjob sets itself is left out: the threads
(``n_jobs``, ``n_threads``), the seed, verbosity, the device, and RealMLP's own validation splits and refits.
"""

from __future__ import annotations

FOREST_PARAMETERS = frozenset(
    {
        "n_estimators", "criterion", "max_depth", "min_samples_split", "min_samples_leaf", "min_weight_fraction_leaf",
        "max_features", "max_leaf_nodes", "min_impurity_decrease", "bootstrap", "class_weight", "ccp_alpha",
        "max_samples", "monotonic_cst",
    }
)  # fmt: skip
KNEIGHBORS_PARAMETERS = frozenset({"n_neighbors", "weights", "algorithm", "leaf_size", "p", "metric"})
REALMLP_PARAMETERS = frozenset(
    {
        "train_metric_name", "val_metric_name", "n_epochs", "batch_size", "predict_batch_size", "hidden_sizes",
        "n_hidden_layers", "hidden_width", "tfms", "num_emb_type", "use_plr_embeddings", "plr_sigma",
        "plr_hidden_1", "plr_hidden_2", "plr_act_name", "plr_use_densenet", "plr_use_cos_bias", "plr_lr_factor",
        "max_one_hot_cat_size", "embedding_size", "act", "use_parametric_act", "act_lr_factor", "weight_param",
        "weight_init_mode", "weight_init_gain", "weight_lr_factor", "bias_init_mode", "bias_lr_factor",
        "bias_wd_factor", "add_front_scale", "scale_lr_factor", "first_layer_lr_factor", "block_str",
        "first_layer_config", "last_layer_config", "middle_layer_config", "p_drop", "p_drop_sched", "wd",
        "wd_sched", "opt", "lr", "lr_sched", "mom", "mom_sched", "sq_mom", "sq_mom_sched", "opt_eps",
        "opt_eps_sched", "normalize_output", "clamp_output", "use_ls", "ls_eps", "ls_eps_sched",
        "use_early_stopping", "early_stopping_additive_patience", "early_stopping_multiplicative_patience",
        "calibration_method", "sort_quantile_predictions", "stop_epoch", "n_ens", "ens_av_before_softmax",
    }
)  # fmt: skip
