"""A network's fit over shards (DDP, each rank iterating only its own rows): what the one-process loop computes from
every training row, computed from the ranks' summaries instead (sharded/summaries.py), over the fit's own group.

- the numeric inputs' statistics (``mlp_inputs.fit_numeric``'s): means, spreads and skews from moments reduced
  over the ranks (exact), medians and the quantile maps from merged sketches (approximate, summaries.py says how
  close), whether a column has more than 10 distinct values from each rank's 11 smallest (exact);
- the regression target's mean, spread and range (exact);
- TabM's bins: quantiles of the preprocessed training columns, from merged sketches;
- the batches: every rank takes the same number of batches of the same size each epoch, from its own rows in its
  own shuffled order (a rank with fewer rows than the others wraps around), so DDP's all-reduce pairs up;
- validation: each rank predicts its own validation rows; the predictions (never the rows) go to the fit's leader,
  which scores them all and decides, as in the one-process loop, whether to stop.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from tabjob_trainer.models.base import FitContext
from tabjob_trainer.sharded import summaries
from tabjob_trainer.sharded.collective import gather_to_leader

_QUANTILES = 200  # mlp_inputs' reference points per quantile-mapped column
_DISTINCT = 10  # mlp_inputs maps a skewed column only with more distinct values than this


def all_gather(ctx: FitContext, value: Any) -> list[Any]:
    import torch.distributed as dist

    everyone: list[Any] = [None] * len(ctx.ranks)
    dist.all_gather_object(everyone, value, group=ctx.group)
    return everyone


def total_rows(ctx: FitContext, rows: int) -> int:
    return int(sum(all_gather(ctx, rows)))


def fit_numeric(ctx: FitContext, numeric: np.ndarray, skew_threshold: float) -> dict[str, Any]:
    """``mlp_inputs.fit_numeric`` over every rank's training rows."""
    values = numeric.astype(np.float64)
    d = values.shape[1]
    merged = summaries.merge_moments(all_gather(ctx, summaries.moments(values)))
    count = np.maximum(merged.count, 1)
    mean = np.where(merged.count > 0, merged.total / count, 0.0)
    second, third = np.sum(all_gather(ctx, summaries.central(values, mean)), axis=0)
    spread = np.sqrt(second / count)
    skew = np.where(spread > 0, (third / count) / np.where(spread > 0, spread, 1.0) ** 3, 0.0)
    sketches = all_gather(ctx, summaries.sketch(values))
    smallest = all_gather(ctx, [np.unique(values[:, j][~np.isnan(values[:, j])])[: _DISTINCT + 1] for j in range(d)])
    median, maps = np.zeros(d), list[list[float]]()
    for j in range(d):
        if merged.count[j] == 0:
            maps.append([])
            continue
        median[j] = float(summaries.merged_quantiles(sketches, j, np.array([0.5]))[0])
        distinct = np.unique(np.concatenate([s[j] for s in smallest])).size
        if abs(skew[j]) > skew_threshold and distinct > _DISTINCT:
            refs = np.linspace(0.0, 1.0, min(_QUANTILES, int(merged.count[j])))
            maps.append(summaries.merged_quantiles(sketches, j, refs).tolist())
        else:
            maps.append([])
    return {
        "median": median.tolist(),
        "mean": mean.tolist(),
        "std": np.where(spread > 0, spread, 1.0).tolist(),
        "quantiles": maps,
        "missing_columns": [int(j) for j in np.flatnonzero(merged.missing)],
    }


def target(ctx: FitContext, y: np.ndarray) -> tuple[float, float, float, float]:
    """(mean, spread, low, high) of the regression target over every rank's training rows."""
    merged = summaries.merge_moments(all_gather(ctx, summaries.moments(y.astype(np.float64).reshape(-1, 1))))
    n = max(int(merged.count[0]), 1)
    mean = float(merged.total[0] / n)
    second = float(np.sum(all_gather(ctx, summaries.central(y.reshape(-1, 1), np.array([mean]))), axis=0)[0][0])
    return mean, math.sqrt(second / n) or 1.0, float(merged.low[0]), float(merged.high[0])


def quantiles(ctx: FitContext) -> Any:
    """TabM's quantile function over every rank's rows: (rows x columns, levels) -> each column's quantiles."""

    def merged(numeric: torch.Tensor, refs: torch.Tensor) -> list[torch.Tensor]:
        sketches = all_gather(ctx, summaries.sketch(numeric.to(torch.float64).numpy()))
        levels = refs.to(torch.float64).numpy()
        return [torch.from_numpy(summaries.merged_quantiles(sketches, j, levels)) for j in range(numeric.shape[1])]

    return merged


def steps(ctx: FitContext, rows: int, batch: int) -> int:
    """Batches per epoch on every rank: the whole training set's, split evenly over the ranks."""
    return max(1, math.ceil(total_rows(ctx, rows) / (len(ctx.ranks) * batch)))


def batches(rows: int, count: int, batch: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """``count`` batches of ``batch`` of this rank's rows, shuffled, wrapping around where it has fewer."""
    needed = count * batch
    order = torch.cat([torch.randperm(rows, generator=generator) for _ in range(max(1, math.ceil(needed / rows)))])
    for start in range(0, needed, batch):
        yield order[start : start + batch]


def gathered_validation(ctx: FitContext, logits: torch.Tensor, y: np.ndarray) -> tuple[torch.Tensor, np.ndarray] | None:
    """Every rank's validation outputs and labels on the leader (None elsewhere)."""
    received = gather_to_leader(ctx, (logits, y))
    if received is None:
        return None
    return torch.cat([r[0] for r in received]), np.concatenate([r[1] for r in received])
