"""The whole job on one rank: read inputs, run this rank's fits, and on rank 0 write the results.

Kept apart from ``__main__`` so tests and benchmarks can call it; all thinking happens in the pure modules.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from tabjob.api import API_VERSION, KIND, TabularJobSpec, parse_manifest
from tabjob.api.parse import load_documents
from tabjob.contracts import pod
from tabjob.contracts.plan import Plan
from tabjob.contracts.results import DataSummary, ErrorReason, RunSummary
from tabjob.planner.memory import imports_torch
from tabjob_trainer import store
from tabjob_trainer.dataset import Prepared, data_summary
from tabjob_trainer.durable import fsync_dir, read_json_object, write_json
from tabjob_trainer.errors import DataError
from tabjob_trainer.fingerprint import data_identity, fingerprint_of
from tabjob_trainer.leaderboard import RESULT_FILES, write_results
from tabjob_trainer.memory_probe import peak_line
from tabjob_trainer.post_base import plan_reserve, reserve_seconds, sized_after
from tabjob_trainer.progress import Progress
from tabjob_trainer.reading import read_training_data
from tabjob_trainer.scheduler import RankEnv, RankRunner, trains_networks
from tabjob_trainer.splits import too_few_rows
from tabjob_trainer.storage.filesystems import StorageError
from tabjob_trainer.storage.runs import RunMirror, join
from tabjob_trainer.termination import write_message
from tabjob_trainer.warmup import WarmUp

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


@dataclass
class Inputs:
    spec: Path
    plan: Path
    out: Path


def load_spec(path: Path) -> TabularJobSpec:
    # kubectl's YAML (a superset of JSON): PyYAML's own resolver reads spec.json's 1e-06 as the string "1e-06".
    docs = load_documents(path)
    doc = docs[0] if docs else None
    if isinstance(doc, dict) and "apiVersion" in doc:
        return parse_manifest(doc).spec
    return TabularJobSpec.model_validate(doc)


def write_termination(summary: RunSummary) -> None:
    """Rank 0 only: the container's termination message, which the operator turns into status.

    Other ranks write nothing, so they can never overwrite rank 0's summary, and a crashed rank leaves the file
    empty for the kubelet's FallbackToLogsOnError to show its log tail.
    """
    write_message(summary.for_termination())


class Dist:
    """The process group, or nothing when the job runs in a single process."""

    def __init__(self, rank: int, world: int, timeout_s: float) -> None:
        self.rank, self.world = rank, world
        if world > 1:
            import torch.distributed as dist

            # Imported before the group exists, on purpose: torch.distributed.nn binds `group.WORLD` as a default
            # argument of its functions, and torch's optimizers import it lazily. Imported after init, it would
            # pin the default group past destroy_process_group, its gloo threads would run into interpreter
            # shutdown, and one of them releasing a gather's tensors then aborts the process (SIGABRT) after a
            # finished job.
            import torch.distributed.nn  # noqa: F401

            # Ranks wait for each other's fits between rounds of configs: the timeout must outlast the longest round.
            dist.init_process_group("gloo", timeout=timedelta(seconds=timeout_s))

    def all_merge(self, found: dict[str, Any]) -> dict[str, Any]:
        """Every rank's entries, lower ranks first where two disagree (rank 0 holds the job's store)."""
        if self.world == 1:
            return found
        import torch.distributed as dist

        everyone: list[Any] = [None] * self.world
        dist.all_gather_object(everyone, found)
        merged: dict[str, Any] = {}
        for part in everyone:
            for key, value in part.items():
                merged.setdefault(key, value)
        return merged

    def all_gather(self, value: Any) -> list[Any]:
        """Every rank's value, in rank order, on every rank."""
        if self.world == 1:
            return [value]
        import torch.distributed as dist

        everyone: list[Any] = [None] * self.world
        dist.all_gather_object(everyone, value)
        return everyone

    def gather(self, value: Any) -> list[Any] | None:
        """Every rank's value, in rank order, on rank 0 (None on the others)."""
        if self.world == 1:
            return [value]
        import torch.distributed as dist

        received: list[Any] | None = [None] * self.world if self.rank == 0 else None
        dist.gather_object(value, received, dst=0)
        return received

    def from_zero(self, value: Any) -> Any:
        """Rank 0's value on every rank."""
        if self.world == 1:
            return value
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather_to_zero(self, out: Path, outcomes: list[store.Outcome]) -> None:
        if self.world == 1:
            return
        import torch.distributed as dist

        received: list[Any] | None = [None] * self.world if self.rank == 0 else None
        dist.gather_object(outcomes, received, dst=0)
        if received:
            for part in received:
                for outcome in part or []:
                    store.write(out, outcome)

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


def run(inputs: Inputs, rank: int, world: int, local_rank: int) -> int:
    started = time.time()
    spec = load_spec(inputs.spec)
    plan = Plan.from_json(inputs.plan.read_text())
    if plan.world_size != world:
        print(f"tabjob-trainer: the plan has {plan.world_size} ranks but torchrun started {world}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = inputs.out
    out.mkdir(parents=True, exist_ok=True)
    comm = Dist(rank, world, timeout_s=max(3600.0, 2.0 * (plan.time_limit_seconds or 0)) * 24)
    try:
        return _run(spec, plan, out, comm, local_rank, started)
    finally:
        comm.close()
        print(peak_line(rank), file=sys.stderr)


def _run(spec: TabularJobSpec, plan: Plan, out: Path, comm: Dist, local_rank: int, started: float) -> int:
    rank = comm.rank
    gpu_count = 0
    if imports_torch(plan):  # the planner's memory estimate counts torch by the same rule
        # A single-process GBM-only job never imports torch: a couple of seconds saved on every run.
        import torch

        gpu_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpu_count:
            torch.cuda.set_device(local_rank % gpu_count)
    warm_up = WarmUp(start=trains_networks(plan, rank))  # a rank with a network imported torch just above
    # Rank 0 holds the run; with spec.output.uri it mirrors it into object storage and resumes from there.
    mirror = RunMirror(spec.output.uri, out) if spec.output.uri and rank == 0 else None
    if rank == 0:
        store.clean_temporaries(out)
    comm.barrier()
    d = spec.data
    try:
        read = read_training_data(spec, plan, comm, local_rank)
    except DataError as exc:  # a StorageError, an agreed ReadError: each with its reason
        return _bad_data(out, rank, str(exc), cast(ErrorReason, getattr(exc, "reason", "InvalidData")))
    data = read.data
    short = too_few_rows(data.rows, plan.folds)
    if short:
        return _bad_data(out, rank, f"{d.train}: {short}")
    if mirror is not None:
        # After the data: a user whose keys are wrong for both hears about the input first. The other ranks wait
        # for rank 0 in the next collective, all_merge.
        try:
            mirror.restore()
        except StorageError as exc:
            return _bad_data(out, rank, str(exc), cast(ErrorReason, exc.reason))
    data_id = data.shard.identity if data.shard else data_identity(data)
    # The time limit is a budget for fitting: reading a large table from object storage must not spend it, so the
    # clock starts once the data is in memory (the elapsed time in the summary still counts from the start).
    loaded = time.time()
    done = comm.all_merge(store.finished(out))
    deadline = comm.from_zero(run_deadline(out, plan, data_id, loaded) if rank == 0 else None)
    if mirror is not None:
        mirror.sync()  # run.json: a retried attempt keeps this one's clock
    progress = Progress(out, rank, total=len(plan.fits))
    how = "sharded" if read.reading.mode == "sharded" else f"whole: {read.reading.reason}"
    rank_rows = comm.all_gather(len(data.y)) if data.shard else None
    about = data_summary(data, how, rank_rows)
    try:
        if rank == 0:
            if mirror is not None:
                mirror.begin()  # from here on the bucket's run reads as unfinished until this attempt commits
            _write_inputs(out, plan, data, about)
            _write_manifest(out, spec)
            progress.serve()
            progress.job_started(resumed=len(done), world=comm.world, data=about)
        # The stack layer and the refit start only when every base model is done: their shares of the budget are
        # kept from them, then sized from the fits once the configs the estimate reads have run (post_base.py).
        base_deadline = deadline - plan_reserve(plan) if deadline is not None else None
        sized = deadline is not None and data.shard is None and plan_reserve(plan) > 0
        readable = sized_after(plan)
        said = False  # whether rank 0 has printed the base models' deadline yet
        env = RankEnv(
            rank=rank, world=comm.world, out=out, deadline=base_deadline, gpu_count=gpu_count, data_id=data_id
        )

        def gather(new: list[store.Outcome], order: int) -> float | None:
            nonlocal said
            comm.gather_to_zero(out, new)
            if mirror is not None:
                mirror.sync()  # every fit rank 0 now holds, copied in the background
            if not sized or readable is None or order < readable:
                return None
            assert deadline is not None
            moved = None
            if rank == 0:
                moved = deadline - reserve_seconds(plan, list(store.records(out).values()), len(data.y))
                # A line when it is first sized (even where it stays at the plan's share) and when it moves.
                if not said or abs(moved - (env.deadline or moved)) >= 5:
                    said = True
                    print(
                        f"tabjob-trainer: base models' deadline {plan.time_limit_seconds - deadline + moved:.0f} s "
                        f"into the {plan.time_limit_seconds} s (kept after them: {deadline - moved:.0f} s)",
                        file=sys.stderr,
                    )
            return cast(float, comm.from_zero(moved))

        RankRunner(env, plan, data, progress, done, warm_up.wait).run(gather)
        if rank != 0:
            return 0
        summary = write_results(out, plan, data.whole_labels(), store.records(out), time.time() - started, deadline)
        if spec.export is not None and summary.best_model is not None:
            summary = _export(out, summary)
        if mirror is not None:
            summary = _commit(mirror, summary)
        write_termination(summary)
        progress.job_ended(summary)
    finally:
        progress.close()
    if summary.best_model is None:
        if summary.error:  # models finished but none may be deployed (spec.inferLimitMsPer1000Rows)
            write_json(out / "error.json", {"error": summary.error, "class": "InferLimitError"})
        why = summary.error or "no model finished; see leaderboard.json for each fit's error"
        print(f"tabjob-trainer: {why}", file=sys.stderr)
        return EXIT_FAILED
    if summary.error:  # spec.export asked for an export that could not be written, or the commit failed
        return EXIT_FAILED
    return 0


def _commit(mirror: RunMirror, summary: RunSummary) -> RunSummary:
    """Copy what is left of the run and commit it; the summary then names the URI (status.outputUri)."""
    try:
        files = mirror.commit()
    except StorageError as exc:
        print(f"tabjob-trainer: {exc}", file=sys.stderr)
        return summary.model_copy(update={"error": str(exc), "error_reason": exc.reason})
    megabytes = mirror.bytes_copied / 2**20
    print(
        f"tabjob-trainer: committed {len(files)} files to {mirror.uri} ({megabytes:.1f} MiB copied in "
        f"{mirror.seconds_copying:.1f} s)",
        file=sys.stderr,
    )
    update: dict[str, Any] = {"output_uri": mirror.uri}
    if summary.export_path:
        relative = Path(summary.export_path).relative_to(mirror.local).as_posix()
        update["export_path"] = join(mirror.uri, relative)
    return summary.model_copy(update=update)


RUN_FILE = "run.json"


def run_deadline(out: Path, plan: Plan, data_id: str, started: float) -> float | None:
    """The run's deadline, kept in run.json so a restarted attempt or a resume keeps the first attempt's clock.

    `started` is when the clock starts: the moment the data was loaded. A run is the same run while its plan and
    data are: other inputs start a new clock.
    """
    if not plan.time_limit_seconds:
        return None
    inputs = fingerprint_of(plan.to_json_dict()["fits"], data_id)
    stored = read_json_object(out / RUN_FILE)
    if stored is not None and stored.get("inputs") == inputs and isinstance(stored.get("deadline"), float):
        return float(stored["deadline"])
    deadline = started + plan.time_limit_seconds
    write_json(out / RUN_FILE, {"inputs": inputs, "startedAt": started, "deadline": deadline})
    return deadline


def _export(out: Path, summary: RunSummary) -> RunSummary:
    """spec.export: the MLServer export of the best model into the output; the summary names where (exportPath).

    A job that asked for an export and could not write one says why in its summary instead of naming a path.
    """
    from tabjob_trainer.serving.export import EXPORT_DIR, default_name, write_mlserver

    name = pod.JOB_NAME.get() or default_name(out)  # set in the operator's pods
    try:
        target = write_mlserver(out, out / EXPORT_DIR, name)
    except DataError as exc:
        print(f"tabjob-trainer: spec.export: {exc}", file=sys.stderr)
        return summary.model_copy(update={"error": f"spec.export: {exc}", "error_reason": "ExportFailed"})
    return summary.model_copy(update={"export_path": str(target)})


def _bad_data(out: Path, rank: int, message: str, reason: ErrorReason = "InvalidData") -> int:
    # Every rank writes the one-line error (atomically; they read the same rows, so the same line): a rank that found
    # it first and exited made torchrun stop rank 0 before rank 0 had written it, and `tabjob run` then showed
    # torchrun's report instead of the reason.
    write_json(out / "error.json", {"error": message, "class": "DataError", "reason": reason})
    if rank == 0:
        write_termination(RunSummary(error=message, error_reason=reason))
        print(f"tabjob-trainer: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _write_manifest(out: Path, spec: TabularJobSpec) -> None:
    """spec.json, the job as a manifest, so that a run read back from a bucket says which job wrote it (`tabjob
    export --format kserve` takes its name, namespace and ServiceAccount). `tabjob run` writes its own first."""
    if (out / "spec.json").exists():
        return
    metadata = {"name": pod.JOB_NAME.get() or out.name}
    if namespace := pod.NAMESPACE.get():
        metadata["namespace"] = namespace
    body = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    account = pod.SERVICE_ACCOUNT.get("default")
    if account != "default":  # the plan ConfigMap leaves it out
        body["serviceAccountName"] = account
    manifest = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": body}
    write_json(out / "spec.json", manifest)


def _write_inputs(out: Path, plan: Plan, data: Prepared, summary: DataSummary) -> None:
    # An earlier attempt's results describe other inputs until this one writes its own: leaderboard.json marks a
    # finished run, so it goes before the new preprocessing is written (predict never mixes the two).
    for stale in RESULT_FILES:
        (out / stale).unlink(missing_ok=True)
    fsync_dir(out)
    write_json(out / "plan.json", plan.to_json_dict())
    write_json(
        out / "preprocessing.json",
        {
            "features": data.pre.to_dict(),
            "label": data.label.to_dict(),
            "evalMetric": data.metric,
            "data": summary.model_dump(by_alias=True, exclude_none=True),
        },
    )
