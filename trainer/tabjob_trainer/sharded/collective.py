"""The few collectives a fit over several ranks needs over its own ranks (its torch process group), for the families."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tabjob_trainer.models.base import FitContext


def group_sum(ctx: FitContext) -> Any:
    """The element-wise sum of a float64 array over the fit's ranks."""
    import torch
    import torch.distributed as dist

    def reduce(values: np.ndarray) -> np.ndarray:
        tensor = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64))
        if ctx.group is not None and tensor.device.type == "cpu" and _backend(ctx) == "nccl":
            tensor = tensor.cuda()
        dist.all_reduce(tensor, group=ctx.group)
        return np.asarray(tensor.cpu().numpy(), dtype=np.float64)

    return reduce


def any_rank_past(ctx: FitContext, deadline: float) -> Callable[[], bool]:
    """A check every rank of the fit calls once a round, at the same point of the round: True on all of them as soon
    as any rank's clock has passed ``deadline``, so the ranks stop on the same round (each rank's own clock could
    disagree by a round, and a rank that stops alone leaves the others waiting in the learner's collective)."""
    reduce = group_sum(ctx)

    def past() -> bool:
        return bool(reduce(np.array([1.0 if time.time() >= deadline else 0.0]))[0] > 0)

    return past


def _backend(ctx: FitContext) -> str:
    import torch.distributed as dist

    return str(dist.get_backend(ctx.group))


def gather_to_leader(ctx: FitContext, value: Any) -> list[Any] | None:
    """Every rank's value on the fit's leader, in the order of ``ctx.ranks`` (None on the other ranks)."""
    import torch.distributed as dist

    received: list[Any] | None = [None] * len(ctx.ranks) if ctx.leader else None
    dist.gather_object(value, received, dst=ctx.ranks[0], group=ctx.group)
    return received


def broadcast_from_leader(ctx: FitContext, value: Any) -> Any:
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=ctx.ranks[0], group=ctx.group)
    return box[0]
