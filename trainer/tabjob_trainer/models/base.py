"""What every model family receives and returns; the scheduler speaks only this."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

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

    @property
    def distributed(self) -> bool:
        return len(self.ranks) > 1

    @property
    def leader(self) -> bool:
        """The fit's first rank evaluates, saves and reports; the others only help train."""
        return self.rank == self.ranks[0]

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.time()


class Model(Protocol):
    def predict(self, x: Encoded) -> np.ndarray: ...

    def save(self, directory: Path) -> None: ...


@dataclass
class Trained:
    """A finished fit, on the fit's leader rank."""

    model: Model
    device: str  # what it actually trained on ("cpu", "cuda:0", "gpu:0" for OpenCL)
    note: str | None = None  # e.g. the reason for a CPU fallback, shown on the leaderboard
    curve: dict[str, Any] = field(default_factory=dict)  # {"metric": name, "train": [...], "val": [...]}
    importance: dict[str, float] = field(default_factory=dict)
    best_iteration: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
