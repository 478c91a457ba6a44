"""The model-family registry: every family declares what it can do, and an unknown key is refused by name."""

from __future__ import annotations

import pytest

from hack import lightgbm_parameters, xgboost_parameters
from tabjob import families
from tabjob_trainer import metrics
from tabjob_trainer.models import xgb
from tabjob_trainer.models.registry import UnknownModelError, family, known_keys


def test_the_registry_binds_every_declared_family_and_nothing_else() -> None:
    # tabjob.families declares each family once for both sides; the trainer's registry only binds code to it.
    assert known_keys() == families.MODEL_KEYS
    for key in known_keys():
        declared = family(key)
        assert declared.facts is families.FAMILIES[key] and declared.key == key
        assert declared.gpu_backends and declared.curve_unit and declared.defaults


def test_the_spec_accepts_exactly_the_settings_the_trainer_reads() -> None:
    # The planner refuses names outside a family's hyperparameter_names: a network's are the defaults its trainer
    # module reads, LightGBM's are the installed LightGBM's own (regenerate: python -m hack.lightgbm_parameters).
    declared = {k: f.hyperparameter_names for k, f in families.FAMILIES.items() if f.hyperparameter_names}
    assert set(declared) == {"GBM", "XGB", "NN_TORCH", "TABM"}
    assert declared["GBM"] == lightgbm_parameters.names() and set(family("GBM").defaults) <= declared["GBM"]
    # XGBoost's from the boosters it trains (python -m hack.xgboost_parameters), and the three tabjob's loop reads.
    assert declared["XGB"] == xgboost_parameters.names() | set(xgb._LOOP_KEYS)
    assert set(family("XGB").defaults) <= declared["XGB"]
    for key in ("GBM", "XGB"):
        assert all(set(cfg) <= declared[key] for _, cfg in families.FAMILIES[key].portfolio), key
        assert set(families.FAMILIES[key].search_space) <= declared[key], key
    for key in ("NN_TORCH", "TABM"):
        assert declared[key] == set(family(key).defaults), key


def test_the_networks_defaults_portfolios_and_spaces_take_values_their_settings_accept() -> None:
    # The planner checks a network config's values against families.settings: what tabjob itself trains must pass.
    for key in ("NN_TORCH", "TABM"):
        facts = families.FAMILIES[key]
        settings = facts.settings
        assert settings is not None and set(settings) == set(family(key).defaults), key
        configs = [family(key).defaults, *(cfg for _, cfg in facts.portfolio)]
        for name, value in ((n, v) for cfg in configs for n, v in cfg.items()):
            assert settings[name].problem(value) is None, (key, name, value)
        for name, dimension in facts.search_space.items():
            (values,) = dimension.values()
            assert all(settings[name].problem(v) is None for v in values), (key, name, values)


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
    with pytest.raises(UnknownModelError, match=r"unknown model key 'RF'; known keys: GBM, CAT, XGB, NN_TORCH, TABM"):
        family("RF")
