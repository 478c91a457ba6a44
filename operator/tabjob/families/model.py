"""What the control side knows of one model family (``ModelFamily``); the package's ``__init__`` declares each one.

Apart from the declarations so that each stays under the size a product module may have; it imports nothing of
tabjob but the networks' shared settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tabjob.families.network_settings import Setting

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
    # A library family's keys that tabjob's fit loop reads itself (rounds, patience), never the library: their
    # values are checked at plan time the same way (families/tree_loop.py).
    loop_settings: Mapping[str, Setting] = field(default_factory=dict)
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
    # A refit on every training row (spec.refitFull, AutoGluon's refit_full) trains this many iterations: the mean of
    # the bag's folds' best iterations, under this hyperparameter's name (None: the family has no iteration count,
    # and a refit trains its config as it is), with ``refit_settings`` on top (early stopping off: there are no
    # held-out rows left to stop on).
    refit_iterations: str | None = None
    refit_settings: Mapping[str, Any] = field(default_factory=dict)
    # Its refit replaces its bag in the deployed model. False for the networks: a bag of k networks is an ensemble
    # of k differently initialised networks, which one refit on every row is not, and averaging is what networks
    # gain most from. Measured on the AutoGluon peer's 16 tables (BENCHMARKS.md, "Same families with the refit"):
    # a network's refit scored below its bag on the test rows in 10 of 15 cases, a tree model's above its bag in 20
    # of 31. Such a member stays a bag in the refit ensemble, as a member left over for want of time does.
    refit_replaces_bag: bool = True
    # Trained by the presets (its portfolio and random configs). A new family stays out until it has been measured
    # against the families there (BENCHMARKS.md, "New families"); a manifest may always name it.
    in_presets: bool = True

    def __post_init__(self) -> None:
        if self.settings is not None:
            object.__setattr__(self, "hyperparameter_names", frozenset(self.settings))

    @property
    def data_parallel(self) -> bool:
        return "data-parallel" in self.parallelism

    def effective(self, hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
        """What a fit trains with: the defaults under a config's (or a trial's) own hyperparameters."""
        return {**self.defaults, **hyperparameters}
