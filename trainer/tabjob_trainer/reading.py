"""How this job reads its training table, decided on every rank alike before a row is read (docs/sharding.md).

The plan says how the ranks would read it (``plan.reading``); the operator could not look at the table, so here every
rank opens it (its footers), and the same pure rule (``tabjob.planner.sharding.reading_plan``) decides again with
the table's pieces: a table too coarse to split is read whole, saying why. Rank 0 then checks the plan's memory
against the table (``tabjob.planner``, as ``tabjob validate`` does): a pod that cannot hold what it would read ends
the job with reason OutOfMemory and the advice, before any rank reads a row. Where a pod has a memory limit, its first
rank leaves the estimate and the advice as the pod's termination message (``MemoryNote``): should the kernel kill the
pod for memory anyway, the operator's OutOfMemory message carries it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from tabjob.api import TabularJobSpec
from tabjob.api.errors import SpecError
from tabjob.contracts.plan import Plan, ReadingPlan
from tabjob.contracts.results import MemoryNote
from tabjob.families import BUILTIN_SCHEME
from tabjob.planner import DataStats, plan
from tabjob.planner.memory import estimate
from tabjob.planner.sharding import reading_plan
from tabjob_trainer.dataset import Prepared, prepare
from tabjob_trainer.datastats import stats_of
from tabjob_trainer.sharded.load import Alone, ReadError, agreed
from tabjob_trainer.sharded.prepare import Group, prepare_sharded
from tabjob_trainer.storage.datasets import open_dataset
from tabjob_trainer.storage.filesystems import UnknownScheme
from tabjob_trainer.storage.structure import Dataset
from tabjob_trainer.termination import write_message


@dataclass
class Read:
    data: Prepared
    reading: ReadingPlan


def memory_refusal(spec: TabularJobSpec, running: Plan, stats: DataStats) -> str | None:
    """The planner's refusal of this plan's memory for this table, word for word as `tabjob validate` says it."""
    try:
        plan(spec, running.job_name, stats)
    except SpecError as exc:
        lines = [message for field, message in exc.problems if field == "spec.resources.memory"]
        return lines[0] if lines else None
    return None


def memory_note(spec: TabularJobSpec, running: Plan, stats: DataStats, pod_index: int) -> MemoryNote | None:
    """What this pod's termination message says until the job ends, when the pod has a memory limit."""
    memory = estimate(running, stats)
    limit = memory.pod_limits[pod_index]
    if limit is None:
        return None
    processes = max(c.processes for c in running.configs)
    advice = (
        f"the planner estimated {memory.pod_bytes[pod_index] / 2**20:,.0f} MiB for this pod against its limit of "
        f"{limit / 2**20:,.0f} MiB; raise spec.resources.memory, or give every model config processes: "
        f"{processes + 1} or more so each rank reads a smaller shard of the table"
    )
    return MemoryNote(estimate_bytes=memory.pod_bytes[pod_index], limit_bytes=limit, advice=advice)


def read_training_data(spec: TabularJobSpec, running: Plan, comm: Group, local_rank: int) -> Read:
    """The prepared data on this rank: its shard, or the whole table; every failure raised on every rank."""
    d = spec.data
    if d.train.startswith(BUILTIN_SCHEME):
        whole = ReadingPlan(mode="whole", reason="a built-in dataset is one piece")
        return Read(prepare(d.train, d.label, d.problem_type, d.eval_metric, d.test), whole)

    def opened() -> Dataset:
        try:
            return open_dataset(d.train)
        except UnknownScheme as exc:  # as dataset.read_table says it: the built-in datasets are a scheme too
            raise UnknownScheme(exc.uri, exc.scheme, "sklearn://NAME") from None

    dataset = agreed(comm, opened)
    stats = stats_of(dataset)
    reading = reading_plan(running.fits, comm.world, running.stacking, stats)
    refused = next(
        (r for r in comm.all_gather(memory_refusal(spec, running, stats) if comm.rank == 0 else None) if r), None
    )
    if refused:
        raise ReadError(refused, "OutOfMemory")
    if local_rank == 0:
        note = memory_note(spec, running, stats, running.pods.index(running.pod_of_rank(comm.rank)))
        if note is not None:
            write_message(note.for_termination())
    if comm.rank == 0:
        how = "sharded" if reading.mode == "sharded" else f"whole: {reading.reason}"
        print(f"tabjob-trainer: reading {d.train} {how}", file=sys.stderr)
    started = time.perf_counter()
    if reading.mode == "sharded":
        data = prepare_sharded(dataset, d.label, d.problem_type, d.eval_metric, d.test, comm)
        assert data.shard is not None
        pieces = data.shard.pieces
        shown = ", ".join(f"{f}/{g}" for f, g in pieces[:12]) + (" ..." if len(pieces) > 12 else "")
        what = f"{len(data.y)} of {data.rows} rows: pieces (file/row group) {shown}"
    elif dataset.format == "parquet":
        # Read whole by the same reader, alone: column by column into float32, never a pandas copy of the table.
        data = prepare_sharded(dataset, d.label, d.problem_type, d.eval_metric, d.test, Alone(), whole=True)
        what = f"the whole table, {data.rows} rows"
    else:
        data = prepare(d.train, d.label, d.problem_type, d.eval_metric, d.test)
        what = f"the whole table, {data.rows} rows"
    print(f"tabjob-trainer: rank {comm.rank} read {what} in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    return Read(data, reading)
