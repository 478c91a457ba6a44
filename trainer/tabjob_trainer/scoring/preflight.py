"""Before any row is scored: the checks that fail the whole prediction, and pod 0's claim on the output.

Pod 0 (and `tabjob score`) runs `preflight`: the model run is committed and loads, the dataset opens, has rows and
every column the model needs (and each passthrough column), and the output holds no finished result of another
prediction. Each refusal is a `ScoringError` with a reason the TabularPrediction's Failed condition shows. Then it
writes the plan (`store.PLAN`) with its owner, and the other pods, which wait for a plan of their owner, score from
it. The operator cannot do any of this itself: it never holds the bucket's credentials.

A plan already there with the same fingerprint (same model commit, same data files and row groups, same columns and
shards) is resumed, whoever wrote it: its committed parts are kept. A different one, or parts without a plan, are
another prediction's: refused unless `overwrite`, which removes them first.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from tabjob_trainer.errors import DataError
from tabjob_trainer.predictor import RunFiles
from tabjob_trainer.scoring.shards import ShardPiece, fingerprint, shard_count, split
from tabjob_trainer.scoring.store import PLAN, SUCCESS, OutputStore, ScoringPlan, SuccessMarker
from tabjob_trainer.storage.datasets import Dataset, open_dataset
from tabjob_trainer.storage.filesystems import StorageError
from tabjob_trainer.storage.run_reader import open_run

PLAN_WAIT = 900.0  # seconds a pod other than 0 waits for pod 0's plan (pod 0 may be queued or pulling its image)


class ScoringError(DataError):
    """A refusal that ends the prediction; `reason` is one of tabjob.contracts.scoring.ScoringReason."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Request:
    """What to score: the TabularPrediction's spec as the pods get it (or `tabjob score`'s arguments)."""

    model: str
    data: str
    output: str
    passthrough: tuple[str, ...] = ()
    parallelism: int = 1
    owner: str = "local"
    overwrite: bool = False
    model_name: str | None = None


def open_model(model: str, name: str | None = None) -> tuple[Path, RunFiles, str]:
    """(the local copy of the run, its files, the model scored); ModelNotReady when the run is not committed."""
    try:
        run_dir = open_run(model)
        files = RunFiles.read(run_dir)
        chosen = name or files.best
        files.fits_needed(chosen)
    except StorageError as exc:
        raise ScoringError(str(exc), "DataUnavailable") from None
    except DataError as exc:
        raise ScoringError(f"model {model}: {exc}", "ModelNotReady") from None
    return run_dir, files, chosen


def _model_commit(run_dir: Path) -> str:
    """What changes when the run is recommitted: its commit object, or (a local run) its result files."""
    digest = hashlib.sha256()
    for name in ("_COMMITTED.json", "models.json", "leaderboard.json", "preprocessing.json"):
        path = run_dir / name
        if path.is_file():
            digest.update(name.encode() + path.read_bytes())
    return digest.hexdigest()[:32]


def open_data(uri: str) -> Dataset:
    try:
        dataset = open_dataset(uri)
    except StorageError as exc:
        raise ScoringError(str(exc), "DataUnavailable") from None
    except DataError as exc:
        reason = "NoData" if "no data files under it" in str(exc) else "InvalidData"
        raise ScoringError(str(exc), reason) from None
    if dataset.rows == 0:
        raise ScoringError(f"{uri}: none of its {len(dataset.files)} file(s) has a row", "NoData")
    return dataset


def check_columns(dataset: Dataset, files: RunFiles, passthrough: tuple[str, ...]) -> list[str]:
    """The part files' columns; MissingColumns naming every feature and passthrough column the data lacks."""
    have = list(dataset.schema.names)
    features = files.pre.feature_names
    missing = [c for c in features if c not in have]
    if missing:
        raise ScoringError(
            f"{dataset.uri}: the model needs column(s) {', '.join(map(repr, missing))}, which the data lacks; it has "
            f"{', '.join(map(repr, have[:40]))}" + (f" and {len(have) - 40} more" if len(have) > 40 else ""),
            "MissingColumns",
        )
    absent = [c for c in passthrough if c not in have]
    if absent:
        raise ScoringError(
            f"passthroughColumns: {', '.join(map(repr, absent))} not in {dataset.uri}; it has "
            f"{', '.join(map(repr, have[:40]))}",
            "MissingColumns",
        )
    outputs = files.output_columns()
    clash = [c for c in passthrough if c in outputs]
    if clash:
        raise ScoringError(
            f"passthroughColumns: {', '.join(map(repr, clash))} would clash with the prediction's own column(s) "
            f"({', '.join(outputs)}); rename it in the data or leave it out",
            "MissingColumns",
        )
    return [*passthrough, *outputs]


def _pieces(dataset: Dataset) -> list[ShardPiece]:
    out = []
    for piece in dataset.pieces():
        rows = dataset.piece_rows(piece)
        f = dataset.files[piece.file]
        weight = rows if rows is not None else f.size
        out.append(ShardPiece(file=piece.file, row_group=piece.row_group, rows=rows, weight=weight))
    return out


def data_fingerprint(dataset: Dataset) -> str:
    return fingerprint([(f.uri, f.size, list(f.row_groups)) for f in dataset.files])


def make_plan(req: Request, run_dir: Path, files: RunFiles, model_name: str, dataset: Dataset) -> ScoringPlan:
    columns = check_columns(dataset, files, req.passthrough)
    pieces = _pieces(dataset)
    shards = split(pieces, shard_count(len(pieces), req.parallelism, dataset.rows))
    layout = [[(p.file, p.row_group) for p in s.pieces] for s in shards]
    print_ = fingerprint(_model_commit(run_dir), model_name, data_fingerprint(dataset), columns, layout)
    return ScoringPlan(
        owner=req.owner,
        fingerprint=print_,
        model=req.model,
        model_name=model_name,
        data=req.data,
        files=[f.uri for f in dataset.files],
        rows=dataset.rows,
        passthrough=list(req.passthrough),
        columns=columns,
        parallelism=req.parallelism,
        shards=shards,
    )


def claim(store: OutputStore, plan: ScoringPlan, overwrite: bool) -> bool:
    """Make the output this plan's; True when it is already finished by this owner (nothing left to score)."""
    done = store.read_model(SUCCESS, SuccessMarker)
    names = store.names()
    if done is not None or SUCCESS in names:
        if done is not None and done.owner == plan.owner:
            return True
        if not overwrite:
            what = f"{done.rows} rows in {len(done.parts)} part file(s)" if done is not None else "a _SUCCESS marker"
            raise ScoringError(
                f"output {store.uri} already holds a finished result ({what}); set output.overwrite: true "
                "(tabjob score --overwrite) to replace it, or choose another output URI",
                "OutputExists",
            )
        store.clear()
        names = store.names()
    earlier = store.read_model(PLAN, ScoringPlan)
    has_parts = any(n.startswith("part-") for n in names)
    same = earlier is not None and earlier.fingerprint == plan.fingerprint
    if (earlier is not None or has_parts) and not same:
        if not overwrite:
            raise ScoringError(
                f"output {store.uri} holds the part files of another prediction (another model, data or columns); "
                "set output.overwrite: true to replace them, or choose another output URI",
                "OutputExists",
            )
        store.clear()
    store.write(PLAN, plan.model_dump_json(indent=1).encode())
    return False


def preflight(req: Request, store: OutputStore) -> tuple[ScoringPlan, bool]:
    """Pod 0's checks and claim: (the plan, whether the output is already finished by this owner)."""
    run_dir, files, model_name = open_model(req.model, req.model_name)
    dataset = open_data(req.data)
    plan = make_plan(req, run_dir, files, model_name, dataset)
    return plan, claim(store, plan, req.overwrite)


def wait_for_plan(store: OutputStore, owner: str, timeout: float = PLAN_WAIT, poll: float = 2.0) -> ScoringPlan:
    """A pod other than 0: the plan pod 0 wrote for this owner (it refuses, and the operator stops us, if not)."""
    deadline = time.monotonic() + timeout
    while True:
        plan = store.read_model(PLAN, ScoringPlan)
        if plan is not None and plan.owner == owner:
            return plan
        if time.monotonic() >= deadline:
            raise ScoringError(
                f"{store.uri}: pod 0 wrote no plan for this prediction within {timeout:.0f} s", "OutputUnavailable"
            )
        time.sleep(poll)
