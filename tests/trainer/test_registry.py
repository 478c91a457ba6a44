"""The model-family registry: every family declares what it can do, and an unknown key is refused by name."""

from __future__ import annotations

import pytest

from hack import lightgbm_parameters, xgboost_parameters
from tabjob import families
from tabjob_trainer import metrics
from tabjob_trainer.models import gbm, xgb
from tabjob_trainer.models.registry import UnknownModelError, family, known_keys


def test_the_registry_binds_every_declared_family_and_nothing_else() -> None:
    # tabjob.families declares each family once for both sides; the trainer's registry only binds code to it.
    assert known_keys() == families.MODEL_KEYS
    for key in known_keys():
        declared = family(key)
        assert declared.facts is families.FAMILIES[key] and declared.key == key
        assert declared.fit.__module__ == families.FAMILIES[key].trainer_module  # the module families/ names


def test_the_spec_accepts_exactly_the_settings_the_trainer_reads() -> None:
    # The planner refuses names outside a family's hyperparameter_names: a network's are its settings (checked
    # against its defaults in tests/unit/test_families.py), LightGBM's are the installed LightGBM's own (regenerate:
    # python -m hack.lightgbm_parameters).
    declared = {k: f.hyperparameter_names for k, f in families.FAMILIES.items() if f.hyperparameter_names}
    assert set(declared) == {"GBM", "XGB", "NN_TORCH", "TABM", "RF", "XT", "KNN", "REALMLP"}
    # LightGBM's names and the three tabjob's loop adds (its early stopping's growing patience, the set-split limit,
    # comparing the string columns' ways).
    loop = {"adaptive_patience", "max_native_levels", "compare_native_levels"}
    assert declared["GBM"] == lightgbm_parameters.names() | loop
    assert set(family("GBM").defaults) <= declared["GBM"]
    # XGBoost's from the boosters it trains (python -m hack.xgboost_parameters), and the keys tabjob's loop reads.
    assert declared["XGB"] == xgboost_parameters.names() | set(xgb._LOOP_KEYS)
    assert set(family("XGB").defaults) <= declared["XGB"]
    for key in ("GBM", "XGB"):
        assert all(set(cfg) <= declared[key] for _, cfg in families.FAMILIES[key].portfolio), key
        assert set(families.FAMILIES[key].search_space) <= declared[key], key


def test_the_tree_loops_keys_are_declared_with_values_their_defaults_take() -> None:
    # What the planner checks a tree config's loop keys against (families/tree_loop.py): every key is one the
    # family reads, and the defaults pass their own checks.
    for key in ("GBM", "CAT", "XGB"):
        facts = families.FAMILIES[key]
        assert facts.loop_settings, key
        assert facts.hyperparameter_names is None or set(facts.loop_settings) <= facts.hyperparameter_names, key
        for name, setting in facts.loop_settings.items():
            if name in facts.defaults:
                assert setting.problem(facts.defaults[name]) is None, (key, name)
    assert set(families.FAMILIES["XGB"].loop_settings) == set(xgb._LOOP_KEYS)
    assert set(families.FAMILIES["GBM"].loop_settings) == set(gbm._LOOP_KEYS)


def test_the_trainer_scores_and_loads_exactly_what_the_spec_accepts() -> None:
    assert set(metrics._SCORERS) == {*families.CLASSIFICATION_METRICS, *families.REGRESSION_METRICS}
    assert set(families.ERROR_METRICS) <= set(metrics._SCORERS)
    from sklearn import datasets

    assert all(callable(getattr(datasets, f"load_{name}", None)) for name in families.BUILTIN_DATASETS)


def test_capabilities_steer_the_process_group_backend() -> None:
    assert family("NN_TORCH").group_backend(1.0) == "nccl"
    assert family("NN_TORCH").group_backend(0.0) == "gloo"
    assert family("GBM").group_backend(1.0) == "gloo"  # LightGBM talks over its own sockets, the group carries ports


def test_unknown_key_is_an_error_naming_the_known_keys() -> None:
    # Before the registry, any key that was not GBM trained (and loaded) the MLP.
    with pytest.raises(UnknownModelError, match=r"unknown model key 'FASTAI'; known keys: GBM, CAT, XGB, NN_TORCH"):
        family("FASTAI")
