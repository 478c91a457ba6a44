"""The settings tabjob's own networks (the MLP and TabM) read, with the values each accepts: what a setting is, and
those of the training loop the two share; each network's own are declared with its family (``families``).

A leaf module, like ``families``: the planner checks a config's values here, so that ``n_blocks: auto`` (AutoGluon's
spelling for "you choose") or ``amp: "yes"`` is refused at ``tabjob validate`` with the field and what it takes,
not at the first fit inside a pod. The defaults are checked against it (tests/trainer/test_registry.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["int", "number", "bool", "choice"]


@dataclass(frozen=True)
class Setting:
    kind: Kind
    minimum: float | None = None  # inclusive
    below: float | None = None  # exclusive upper bound
    choices: tuple[str, ...] = ()  # kind "choice": the strings it takes; kind "int": strings it takes as well

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not valid here, or None."""
        if isinstance(value, str) and value in self.choices:
            return None
        if self.kind == "choice":
            return f"{value!r} is not one of {', '.join(self.choices)}"
        if self.kind == "bool":
            return None if isinstance(value, bool) else f"{value!r} is not true or false"
        number = _number(value, whole=self.kind == "int")
        if number is None:
            takes = "a whole number" if self.kind == "int" else "a number"
            also = f" or {' or '.join(repr(c) for c in self.choices)}" if self.choices else ""
            return f"{value!r} is not {takes}{also}"
        if self.minimum is not None and number < self.minimum:
            return f"{value!r} is below {self.minimum:g}"
        if self.below is not None and number >= self.below:
            return f"{value!r} must be below {self.below:g}"
        return None

    def describe(self) -> str:
        if self.kind == "choice":
            return f"one of {', '.join(self.choices)}"
        if self.kind == "bool":
            return "true or false"
        text = "a whole number" if self.kind == "int" else "a number"
        if self.minimum is not None:
            text += f" >= {self.minimum:g}"
        if self.below is not None:
            text += f" and < {self.below:g}"
        if self.choices:
            text += f", or {' or '.join(self.choices)}"
        return text


def _number(value: Any, whole: bool) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    if whole and not float(value).is_integer():
        return None
    return float(value)


# What the network loop reads (trainer/tabjob_trainer/models/network.py), for both network families.
LOOP_SETTINGS: Mapping[str, Setting] = {
    "num_epochs": Setting("int", minimum=1),
    "patience": Setting("int", minimum=1),
    "adaptive_patience": Setting("number", minimum=0),
    "lr_plateau": Setting("int", minimum=0),  # 0 keeps the learning rate fixed
    "batch_size": Setting("int", minimum=1, choices=("auto",)),
    "learning_rate": Setting("number", minimum=0),
    "weight_decay": Setting("number", minimum=0),
    "lr_scaling": Setting("choice", choices=("linear", "sqrt", "none")),
    "skew_threshold": Setting("number", minimum=0),
    "regression_loss": Setting("choice", choices=("huber", "mse", "l1")),
    "amp": Setting("bool"),
    "dropout_prob": Setting("number", minimum=0, below=1),
    "gradient_clip": Setting("number", minimum=0),  # the gradients' largest norm; 0 leaves them as they are
}

# TabM's network (trainer/tabjob_trainer/models/tabm.py), besides the loop's.
TABM_SETTINGS: Mapping[str, Setting] = {
    "k": Setting("int", minimum=1),
    "d_block": Setting("int", minimum=1),
    "n_blocks": Setting("int", minimum=1),
    "d_embedding": Setting("int", minimum=1),
    "n_bins": Setting("int", minimum=2),  # piecewise-linear encoding needs two edges per column
    # "tabm": every layer a BatchEnsemble; "tabm-mini": one per-member scaling of the input, the rest shared.
    "arch_type": Setting("choice", choices=("tabm", "tabm-mini")),
    "share_batches": Setting("bool"),  # false: every member sees its own shuffle of the rows
}

# AutoGluon's TabM (its TabArena port) spells these its own way; ``tabjob from-autogluon`` renames them.
TABM_AUTOGLUON_RENAMES: tuple[tuple[str, str], ...] = (
    ("tabm_k", "k"),
    ("lr", "learning_rate"),
    ("dropout", "dropout_prob"),
    ("num_emb_n_bins", "n_bins"),
    ("n_epochs", "num_epochs"),
    ("allow_amp", "amp"),
    ("share_training_batches", "share_batches"),
    ("gradient_clipping_norm", "gradient_clip"),
)
