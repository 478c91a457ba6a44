"""NN_TORCH: an MLP over its own numeric preprocessing (mlp_inputs.py) and categorical embeddings.

The network and what its saved model keeps; training is the loop the network families share (``network.py``:
early stopping on the validation fold's metric, AMP on GPU, DDP over the fit's ranks, the out-of-memory retry).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from tabjob import families
from tabjob_trainer.models.base import Family, FitContext, Trained
from tabjob_trainer.models.mlp_inputs import width
from tabjob_trainer.models.network import Network, NetworkModel, fit_network
from tabjob_trainer.preprocess import Encoded
from tabjob_trainer.problem import ProblemType


def embedding_dim(cardinality: int, cap: int) -> int:
    # fast.ai's rule of thumb, capped: enough capacity for rare categories without blowing up width.
    return int(min(cap, round(1.6 * (cardinality + 1) ** 0.56)))


class TabularMLP(nn.Module):
    def __init__(
        self, n_numeric: int, cardinalities: list[int], n_out: int, hidden: int, layers: int, dropout: float, cap: int
    ) -> None:
        super().__init__()
        # Row 0 of every embedding is "missing or unseen"; known categories are shifted by one.
        dims = [embedding_dim(c, cap) for c in cardinalities]
        self.embeddings = nn.ModuleList([nn.Embedding(c + 1, d) for c, d in zip(cardinalities, dims, strict=True)])
        width = n_numeric + sum(dims)
        blocks: list[nn.Module] = []
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        blocks.append(nn.Linear(width, n_out))
        self.body = nn.Sequential(*blocks)

    def forward(self, numeric: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        parts = [numeric] + [emb(categorical[:, i]) for i, emb in enumerate(self.embeddings)]
        out: torch.Tensor = self.body(torch.cat(parts, dim=1) if len(parts) > 1 else numeric)
        return out


def mlp_settings(hp: dict[str, Any], numeric: torch.Tensor, quantiles: Any = None) -> dict[str, Any]:
    """What the MLP's architecture keeps in its saved config."""
    return {k: hp[k] for k in ("hidden_size", "num_layers", "dropout_prob", "max_embedding_dim")}


def build(cfg: dict[str, Any]) -> nn.Module:
    return TabularMLP(
        width(cfg["numeric"]),
        cfg["cardinalities"],
        cfg["n_out"],
        cfg["hidden_size"],
        cfg["num_layers"],
        cfg["dropout_prob"],
        cfg["max_embedding_dim"],
    )


NETWORK = Network(families.NN_TORCH, mlp_settings, build)


def fit(ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray) -> Trained | None:
    return fit_network(ctx, train, y_train, val, y_val, NETWORK)


def load(directory: Path, problem: ProblemType) -> NetworkModel:
    return NetworkModel.load(directory, problem, NETWORK)


FAMILY = Family(facts=families.NN_TORCH, fit=fit, load=load)  # DDP over the fit's ranks, one GPU per rank
