"""TABM: TabM (Gorishniy et al., ICLR 2025, the authors' ``tabm`` package), k MLPs trained at once as one network.

The k members share their weights except for small per-member scalings (BatchEnsemble: every layer's with
``arch_type: tabm``, the first layer's input alone with ``tabm-mini``), each see their own shuffle of the rows
(``share_batches: false``, as in the paper; where a fit's ranks split the rows, they share each batch), are
each trained on their own loss and predict as the mean of their probabilities or values: most of a deep ensemble's
gain for the price of one wider network. Numeric columns go through the MLP's own preprocessing (``mlp_inputs``:
median fill with missing flags, a normal quantile map for every column with more than 10 distinct values, as the
paper's quantile transform) and then piecewise-linear embeddings over quantile bins of the training rows
(``rtdl_num_embeddings``, version B: linear at first, the piecewise part learnt); string columns are one-hot.

Training, early stopping on the validation fold's metric, AMP on GPU, the out-of-memory retry and saving are the
loop the network families share (``network.py``): only the network and its saved settings differ. One process
per fit (no DDP).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch
from rtdl_num_embeddings import PiecewiseLinearEmbeddings
from tabm import TabM
from torch import nn

from tabjob import families
from tabjob_trainer.models.base import Family, FitContext, Trained
from tabjob_trainer.models.network import Network, NetworkModel, Quantiles, fit_network, local_quantiles
from tabjob_trainer.preprocess import Encoded
from tabjob_trainer.problem import ProblemType


def quantile_bins(numeric: torch.Tensor, n_bins: int, quantiles: Quantiles = local_quantiles) -> list[list[float]]:
    """Bin edges per column at the training rows' quantiles (over every rank's rows when ``quantiles`` merges the
    ranks' sketches); a column with a single value gets one bin around it."""
    edges: list[list[float]] = []
    refs = torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64)
    found_all = quantiles(numeric, refs)
    for j in range(numeric.shape[1]):
        # Unique after the cast to float32, the embeddings' precision: quantiles apart in float64 can round to
        # the same float32, and rtdl refuses edges that are not strictly increasing.
        found = torch.unique(found_all[j].to(torch.float32)) if len(found_all[j]) else torch.empty(0)
        if len(found) < 2:
            centre = float(found_all[j][0]) if len(found_all[j]) else 0.0
            found = torch.tensor([centre - 1.0, centre + 1.0], dtype=torch.float32)
        edges.append([float(v) for v in found])
    return edges


def tabm_settings(hp: dict[str, Any], numeric: torch.Tensor, quantiles: Quantiles = local_quantiles) -> dict[str, Any]:
    """TabM's saved settings; the bins come from the preprocessed training columns and are kept, so that a loaded
    model is built with the same shapes before its weights are read."""
    return {
        **{key: int(hp[key]) for key in ("k", "d_block", "n_blocks", "d_embedding")},
        "dropout_prob": float(hp["dropout_prob"]),
        "arch_type": str(hp["arch_type"]),
        "bins": quantile_bins(numeric, int(hp["n_bins"]), quantiles) if numeric.shape[1] else [],
    }


class TabMNet(nn.Module):
    """TabM over the MLP's inputs: (numeric, category codes with 0 for missing) -> (rows, k, outputs)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__()
        bins = [torch.tensor(b, dtype=torch.float32) for b in cfg["bins"]]
        with warnings.catch_warnings():
            # A 0/1 missing flag or a constant column has one bin, which rtdl warns is a min-max scaling: it is.
            warnings.filterwarnings("ignore", message=".*just two bin edges", category=UserWarning)
            embeddings = (
                PiecewiseLinearEmbeddings(bins, cfg["d_embedding"], activation=False, version="B") if bins else None
            )
        self.has_numeric = bool(bins)
        self.has_categorical = bool(cfg["cardinalities"])
        self.net = TabM.make(
            n_num_features=len(bins),
            cat_cardinalities=[c + 1 for c in cfg["cardinalities"]],  # code 0: missing or unseen
            d_out=cfg["n_out"],
            num_embeddings=embeddings,
            k=cfg["k"],
            d_block=cfg["d_block"],
            n_blocks=cfg["n_blocks"],
            dropout=cfg["dropout_prob"],
            arch_type=cfg.get("arch_type", "tabm"),  # models saved before the setting existed were "tabm"
        )

    def forward(self, numeric: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        """Rows as (rows, columns), every member seeing them, or (rows, k, columns), each member its own."""
        out: torch.Tensor = self.net(
            numeric if self.has_numeric else None, categorical if self.has_categorical else None
        )
        return out


# Training rows below each bound -> the batch: the TabM authors' choices in the paper's experiments (AutoGluon's TabM
# uses the same table). Smaller than the MLP's from 1,000 to 2,800 rows, larger from 4,500.
_TABM_BATCHES = ((2_800, 32), (4_500, 64), (6_400, 128), (32_000, 256), (108_000, 512))


def tabm_batch(rows: int) -> int:
    return next((batch for bound, batch in _TABM_BATCHES if rows < bound), 1024)


NETWORK = Network(
    families.TABM,
    tabm_settings,
    TabMNet,
    own_batches=lambda hp: 0 if hp["share_batches"] else int(hp["k"]),
    batch_for_rows=tabm_batch,
)


def fit(ctx: FitContext, train: Encoded, y_train: Any, val: Encoded, y_val: Any) -> Trained | None:
    return fit_network(ctx, train, y_train, val, y_val, NETWORK)


def load(directory: Path, problem: ProblemType) -> NetworkModel:
    return NetworkModel.load(directory, problem, NETWORK)


FAMILY = Family(facts=families.TABM, fit=fit, load=load)
