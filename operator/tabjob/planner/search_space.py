"""Hyperparameter search spaces and the random searcher (pure and seeded, so a plan is reproducible).

Trial 0 of every config trains the config's own hyperparameters (AutoGluon's random searcher also
starts from the defaults); later trials draw from the space.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any

from tabjob.api import ModelConfig, SearchDimension, TuningSpec
from tabjob.families import FAMILIES

# Each family's default space (families/, in the spec's spelling), validated as the spec's own dimensions are.
DEFAULT_SPACES: dict[str, dict[str, SearchDimension]] = {
    f.key: {param: SearchDimension.model_validate(dim) for param, dim in f.search_space.items()}
    for f in FAMILIES.values()
}


def space_for(key: str, name: str, tuning: TuningSpec) -> dict[str, SearchDimension]:
    """The default space for the model key, overridden by the spec's entry for the key, then the config."""
    space = dict(DEFAULT_SPACES[key])
    space.update(tuning.search_space.get(key, {}))
    if name != key:
        space.update(tuning.search_space.get(name, {}))
    return space


def sample(dim: SearchDimension, rng: random.Random) -> Any:
    if dim.int_ is not None:
        return rng.randint(dim.int_[0], dim.int_[1])
    if dim.uniform is not None:
        return rng.uniform(dim.uniform[0], dim.uniform[1])
    if dim.log_uniform is not None:
        lo, hi = math.log(dim.log_uniform[0]), math.log(dim.log_uniform[1])
        return math.exp(rng.uniform(lo, hi))
    assert dim.choice is not None
    return rng.choice(dim.choice)


def trial_hyperparameters(key: str, name: str, config: ModelConfig, tuning: TuningSpec, trial: int) -> dict[str, Any]:
    """Hyperparameters of one trial: the config's own for trial 0, a seeded draw for the others."""
    params = dict(config.hyperparameters)
    if trial == 0:
        return params
    # A stable seed per (config, trial): adding a config must not change another config's trials.
    digest = hashlib.sha256(f"{name}/{trial}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    for param, dim in sorted(space_for(key, name, tuning).items()):
        params[param] = sample(dim, rng)
    return params
