"""Will each pod fit its memory? The planner's estimate from the table's metadata, before a row is read.

A pod holds the launcher and torchrun's agent (``POD_BASE_BYTES``) and its ranks; a rank holds the interpreter and
the libraries (``RANK_BASE_BYTES``) and its rows: the whole table when it reads whole, its share of the pieces when
the job reads sharded (planner/sharding.py), times what the plan's hungriest family needs per byte of those rows as
float64 at its peak, reading whole or its shard (``families.ModelFamily.memory_per_byte``,
``sharded_memory_per_byte``). Rank 0 also keeps every row's label and each model's out-of-fold predictions, and
writes the results (the ensemble, the metrics) over all of them (``LEADER_BYTES_PER_ROW`` and
``LEADER_BYTES_PER_ROW_PER_MODEL``). The constants are measured (bench/sharded_memory.py, BENCHMARKS.md "Tables
larger than one pod"); the estimate is meant to refuse what cannot fit, not to size pods to the byte.

A plan whose pod would not fit is refused with both numbers and the smallest ``processes`` that would fit
(``tabjob validate``, ``tabjob plan``); the trainer checks the same on rank 0 before reading a row, since the operator
cannot read the data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tabjob.api import parse_quantity
from tabjob.contracts.plan import MemoryPlan, Plan
from tabjob.families import family
from tabjob.planner.sharding import DataStats, assign

MIB = 2**20
# Fitted to bench/sharded_memory.py's pod peaks (cgroup): one process reading whole without torch ~660 MiB before
# its rows, a sharded rank with its process group ~810 MiB; rounded up a little, since the estimate must refuse what
# cannot fit without refusing what does.
POD_BASE_BYTES = 300 * MIB  # the launcher and torchrun's agent (torch imported), as a pod's cgroup counts them
RANK_BASE_BYTES = 370 * MIB  # a trainer process: Python, numpy, pyarrow, LightGBM, XGBoost
TORCH_BYTES = 150 * MIB  # what torch adds to a rank that imports it (a process group, a network family, a GPU)
# Rank 0 peaks while it writes the results, after the fits: on the sharded e2e's table under `tabjob run` (800,000
# rows, binary, 3 sharded ranks, 3 folds) its peak was 147 MiB above the other ranks' with 2 models and 199 MiB
# with 4, so about 125 B a row plus 34 B a row for each model. A multiclass model's predictions are as wide as its
# classes, which the planner cannot know before the rows are read: the constants are for one column, rounded up.
LEADER_BYTES_PER_ROW = 128  # every row's label and row index, and the ensemble's and metrics' working copies
LEADER_BYTES_PER_ROW_PER_MODEL = 36  # each model's out-of-fold predictions
MAX_PROCESSES = 64  # the smallest `processes` that fits is searched up to this many


def table_bytes(stats: DataStats) -> int:
    """The table in memory: rows x columns as float64, or the footers' uncompressed size where larger (strings);
    a CSV file's text is about its values' float64 size."""
    if stats.rows is None:
        return stats.stored_bytes
    return max(stats.rows * stats.columns * 8, stats.uncompressed_bytes or 0)


def rank_shares(stats: DataStats, world: int, sharded: bool) -> list[float]:
    """Each rank's share of the table: 1 each when every rank reads whole, its pieces' share when sharded."""
    if not sharded:
        return [1.0] * world
    total = sum(stats.pieces) or 1
    return [sum(stats.pieces[i] for i in mine) / total for mine in assign(stats.pieces, world)]


def estimate(plan: Plan, stats: DataStats) -> MemoryPlan:
    """Each pod's estimated peak against its limit (pure)."""
    sharded = plan.reading.mode == "sharded"
    per_byte = max(
        family(c.key).sharded_memory_per_byte if sharded else family(c.key).memory_per_byte for c in plan.configs
    )
    size = table_bytes(stats)
    shares = rank_shares(stats, plan.world_size, sharded)
    models = len({f.model for f in plan.fits})
    rows = stats.rows or size // (8 * max(stats.columns, 1))
    leader = (LEADER_BYTES_PER_ROW + LEADER_BYTES_PER_ROW_PER_MODEL * models) * rows
    base = RANK_BASE_BYTES + (TORCH_BYTES if imports_torch(plan) else 0)
    ranks = [base + per_byte * size * share for share in shares]
    ranks[0] += leader
    pods = [int(POD_BASE_BYTES + sum(ranks[p.first_rank : p.first_rank + p.procs])) for p in plan.pods]
    limits = [int(parse_quantity(p.memory)) if p.memory else None for p in plan.pods]
    return MemoryPlan(rows=stats.rows, columns=stats.columns, table_bytes=size, pod_bytes=pods, pod_limits=limits)


def imports_torch(plan: Plan) -> bool:
    """Whether the trainer imports torch on every rank: a process group, a network family or a GPU (the trainer
    asks this function too)."""
    return plan.world_size > 1 or any(family(f.key).needs_torch or f.gpus > 0 for f in plan.fits)


def over(memory: MemoryPlan) -> int | None:
    """The first pod whose estimate is above its limit, or None when every pod fits."""
    for i, (need, limit) in enumerate(zip(memory.pod_bytes, memory.pod_limits, strict=True)):
        if limit is not None and need > limit:
            return i
    return None


def mib(n: float) -> str:
    return f"{n / MIB:,.0f} MiB"


def refusal(plan: Plan, memory: MemoryPlan, fitting: int | None, memory_field: str | None) -> str | None:
    """Why the plan cannot fit, with both numbers and the way out; None when it fits.

    ``fitting``: the smallest ``processes`` whose plan fits (None: none up to MAX_PROCESSES does); ``memory_field``:
    the spec's memory quantity, to say how much more would fit as it is.
    """
    i = over(memory)
    if i is None:
        return None
    pod, need, limit = plan.pods[i], memory.pod_bytes[i], memory.pod_limits[i]
    assert limit is not None
    rows = f"{memory.rows:,} rows x {memory.columns} columns" if memory.rows is not None else "the CSV files"
    how = (
        "each rank reading its share"
        if plan.reading.mode == "sharded"
        else f"each rank reading the whole table: {plan.reading.reason}"
    )
    ranks = f"{pod.procs} rank(s), {how}"
    parts = [
        f"the table ({rows}, {mib(memory.table_bytes)} as float64) needs about {mib(need)} in pod {pod.name} "
        f"({ranks}), above its memory limit of {mib(limit)}"
    ]
    if fitting is not None:
        parts.append(f"processes: {fitting} on every model config would fit (each rank reads a 1/{fitting} shard)")
    if memory_field is not None:
        total = parse_quantity(memory_field) * need / limit
        parts.append(f"or raise spec.resources.memory to at least {mib(total * 1.05)}")
    return "; ".join(parts)


def smallest_fitting(
    current: int, replan: Callable[[int], Plan | None], stats: DataStats, limit: int = MAX_PROCESSES
) -> int | None:
    """The smallest ``processes`` above ``current`` whose plan (``replan(p)``; None where the spec cannot take it)
    fits every pod's memory."""
    for p in range(current + 1, limit + 1):
        candidate = replan(p)
        if candidate is not None and over(estimate(candidate, stats)) is None:
            return p
    return None


def processes_of(plan: Plan) -> int:
    return max((c.processes for c in plan.configs), default=1)


def keys(plan: Plan) -> Sequence[str]:
    return [c.key for c in plan.configs]
