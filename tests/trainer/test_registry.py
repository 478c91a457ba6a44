"""The model-family registry: every family declares what it can do, and an unknown key is refused by name."""

from __future__ import annotations

import typing

import pytest

from tabjob.api import MODEL_KEYS
from tabjob.plan_model import FitPlan
from tabjob.planner.resources import DATA_PARALLEL_KEYS, SINGLE_DEVICE_KEYS
from tabjob.search_space import DEFAULT_SPACES
from tabjob_trainer.models.registry import UnknownModelError, family, known_keys


def test_registry_agrees_with_the_spec_and_the_planner() -> None:
    # The operator side never imports the trainer; this is where the two lists are held to each other.
    assert set(known_keys()) == set(MODEL_KEYS) == set(typing.get_args(FitPlan.model_fields["key"].annotation))
    assert set(DEFAULT_SPACES) == set(known_keys())
    for key in known_keys():
        declared = family(key)
        assert declared.key == key
        assert dict(declared.search_space) == DEFAULT_SPACES[key]
        assert (key in DATA_PARALLEL_KEYS) == ("data-parallel" in declared.parallelism)
        assert (key in SINGLE_DEVICE_KEYS) == (not declared.multi_gpu_fit)
        assert declared.gpu_backends and declared.curve_unit and declared.defaults


def test_capabilities_steer_the_process_group_backend() -> None:
    assert family("NN_TORCH").group_backend(1.0) == "nccl"
    assert family("NN_TORCH").group_backend(0.0) == "gloo"
    assert family("GBM").group_backend(1.0) == "gloo"  # LightGBM talks over its own sockets, the group carries ports


def test_unknown_key_is_an_error_naming_the_known_keys() -> None:
    # Before the registry, any key that was not GBM trained (and loaded) the MLP.
    with pytest.raises(UnknownModelError, match=r"unknown model key 'XGB'; known keys: GBM, NN_TORCH"):
        family("XGB")
