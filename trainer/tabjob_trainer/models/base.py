"""What every model family receives, returns and declares about itself; the scheduler speaks only this."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from tabjob.families import ModelFamily
from tabjob_trainer.errors import GPUUnavailableError
from tabjob_trainer.preprocess import Encoded
from tabjob_trainer.problem import ProblemType


@dataclass
class FitContext:
    """One fit as this process sees it. ``group`` is the fit's own process group when it spans ranks."""

    fit_id: str
    hyperparameters: dict[str, Any]
    seed: int
    threads: int
    device: str  # "cpu" or "cuda:<index>" for this process
    problem: ProblemType
    n_classes: int
    metric: str
    feature_names: list[str]
    cardinalities: list[int]
    fallback_to_cpu: bool = False
    ranks: list[int] = field(default_factory=lambda: [0])
    rank: int = 0
    group: Any = None
    deadline: float | None = None  # time.time() after which training stops early
    # A refit on every row (spec.refitFull): its iterations are fixed (the bag's), so the validation rows it is
    # given are only watched: no early stopping, no best-iteration choice, no schedule driven by them.
    refit: bool = False
    # Read sharded (docs/sharding.md): each rank's rows are its own shard, not a copy of every row; every rank
    # returns the trained model, predicts its own rows, and validation metrics are reduced over the fit's ranks.
    sharded: bool = False

    @property
    def distributed(self) -> bool:
        return len(self.ranks) > 1

    @property
    def returns_model(self) -> bool:
        """This rank gets the Trained: the leader, or every rank of a sharded fit (each predicts its own rows)."""
        return self.leader or self.sharded

    @property
    def leader(self) -> bool:
        """The fit's first rank evaluates, saves and reports; the others only help train."""
        return self.rank == self.ranks[0]

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.time()

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.time() >= self.deadline

    def cuda_index(self) -> int | None:
        """The CUDA device this fit asked for, or None for a CPU fit."""
        if not self.device.startswith("cuda"):
            return None
        return int(self.device.split(":")[1]) if ":" in self.device else 0

    def cpu_instead(self, why: str) -> str:
        """A GPU fit whose library cannot use the GPU: refuse, naming the way out, or (onGpuUnavailable:
        FallbackToCPU) return the note every CPU-trained row carries. Never a silent fallback."""
        if not self.fallback_to_cpu:
            raise GPUUnavailableError(why + "; set onGpuUnavailable: FallbackToCPU to train on the CPU")
        return "FallbackToCPU: " + why


def usable_cpus(cgroup: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """CPUs this process may use: its affinity, bounded by a cgroup v2 CPU quota (a pod's CPU limit).

    A loaded model predicts on this many threads. The libraries' own default is every core of the host, and OpenMP
    threads beyond a pod's quota, or on a busy machine, wait on each other: a LightGBM predict of 400 rows took
    12 ms on two threads beside other work against 0.1 ms on one.
    """
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = cgroup.read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota readable: the affinity alone
    return max(1, cpus)


class Model(Protocol):
    def predict(self, x: Encoded) -> np.ndarray: ...

    def save(self, directory: Path) -> None: ...


@dataclass
class Trained:
    """A finished fit, on the fit's leader rank."""

    model: Model
    device: str  # what it actually trained on ("cpu", "cuda:0", "gpu:0" for OpenCL)
    fallback: bool = False  # asked for a GPU and trained on the CPU (onGpuUnavailable: FallbackToCPU)
    note: str | None = None  # e.g. the reason for a CPU fallback, shown on the leaderboard
    curve: dict[str, Any] = field(default_factory=dict)  # {"metric": name, "train": [...], "val": [...]}
    importance: dict[str, float] = field(default_factory=dict)
    best_iteration: int = 0
    # Settings the fit chose itself on its validation rows (GBM's string columns' way): its refit trains with them.
    settings_chosen: dict[str, Any] = field(default_factory=dict)
    # Where the fit trained several models and kept one (GBM's and XGB's ways): the kept one's training seconds.
    kept_seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


FitFn = Callable[[FitContext, Encoded, np.ndarray, Encoded, np.ndarray], "Trained | None"]
LoadFn = Callable[[Path, ProblemType], Model]


@dataclass(frozen=True)
class Family:
    """One model family in the trainer: the facts both sides share (``tabjob.families``) bound to its code.

    Declared in the family's own module (``FAMILY``), which holds only what needs the library (fit, predict, load),
    and found through the registry by the module ``tabjob.families`` names. The scheduler, predictor, leaderboard
    and report ask this instead of comparing keys, so a new family is one entry in ``tabjob.families`` and one new
    module here.
    """

    facts: ModelFamily  # key, defaults, parallelism, GPU backends, search space: what the planner reads too
    # Trains one fit. ``ctx.hyperparameters`` are the plan's, the defaults already under them; a fit merges them
    # again (``facts.effective``) for the callers that give only a few (the stack layer, tests).
    fit: FitFn
    load: LoadFn

    @property
    def key(self) -> str:
        return self.facts.key

    @property
    def multi_gpu_fit(self) -> bool:
        return self.facts.multi_gpu_fit

    @property
    def needs_torch(self) -> bool:
        return self.facts.needs_torch

    @property
    def defaults(self) -> Mapping[str, Any]:
        return self.facts.defaults

    @property
    def gpu_backends(self) -> tuple[str, ...]:
        return self.facts.gpu_backends

    @property
    def curve_unit(self) -> str:
        return self.facts.curve_unit

    @property
    def importance(self) -> Literal["gain", "permutation"]:
        return self.facts.importance

    @property
    def colour(self) -> str:
        return self.facts.colour

    def group_backend(self, gpus: float) -> str:
        """The torch process-group backend a data-parallel fit of this family uses for its own collectives."""
        return "nccl" if gpus > 0 and self.multi_gpu_fit else "gloo"
