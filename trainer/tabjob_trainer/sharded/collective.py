"""The few collectives a sharded fit needs over its own ranks (its torch process group), for the families."""

from __future__ import annotations

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
