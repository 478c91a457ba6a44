"""One pod's share: score its shards with the run's `Predictor`, loaded once, and commit one part file per shard.

A shard already committed (its part exists) is skipped, so a retried or preempted pod redoes only what it had not
committed. The next shard is read while the current one is predicted. A shard whose rows the model cannot take
(text in a numeric column, an infinite number) fails alone: its error names the first such row and column, and the
pod goes on with its other shards. After its last shard the pod lists the output and, when every shard of the plan
is committed, writes the success marker (store.py has the protocol).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tabjob.contracts.scoring import ScoringProgress, ScoringSummary, ShardFailure
from tabjob_trainer.errors import DataError
from tabjob_trainer.predictor import Predictor
from tabjob_trainer.scoring.preflight import ScoringError, open_data, open_model
from tabjob_trainer.scoring.shards import Shard, assigned
from tabjob_trainer.scoring.store import SUCCESS, OutputStore, ScoringPlan, SuccessMarker, marker_bytes, part_name
from tabjob_trainer.storage.datasets import Dataset, Piece, read_pieces


@dataclass
class Counters:
    """This pod's progress, shared with the progress endpoint's thread."""

    pod: int
    plan_shards: int = 0
    plan_rows: int | None = None
    shards_total: int = 0
    shards_done: int = 0
    shards_skipped: int = 0
    rows_done: int = 0
    rows_scored: int = 0
    seconds_predicting: float = 0.0
    started: float | None = None
    failures: list[ShardFailure] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> ScoringProgress:
        with self.lock:
            return ScoringProgress(
                pod=self.pod,
                plan_shards=self.plan_shards,
                plan_rows=self.plan_rows,
                shards_total=self.shards_total,
                shards_done=self.shards_done,
                shards_skipped=self.shards_skipped,
                shards_failed=len(self.failures),
                rows_done=self.rows_done,
                rows_scored=self.rows_scored,
                seconds_scoring=round(time.monotonic() - self.started, 3) if self.started else 0.0,
                seconds_predicting=round(self.seconds_predicting, 3),
            )

    def summary(self, success: bool) -> ScoringSummary:
        snap = self.snapshot()
        return ScoringSummary(**snap.model_dump(), failures=list(self.failures), success_marker=success)


def shard_pieces(shard: Shard) -> list[Piece]:
    return [Piece(p.file, p.row_group) for p in shard.pieces]


def read_shard(dataset: Dataset, shard: Shard) -> pa.Table:
    return read_pieces(dataset, shard_pieces(shard))


def score_table(predictor: Predictor, table: pa.Table, passthrough: list[str], source: str) -> pa.Table:
    """The part file's table: the passthrough columns as read, then `tabjob predict`'s columns."""
    frame = table.to_pandas(split_blocks=True)
    scored = predictor.predict_frame(frame, source)
    out = pa.Table.from_pandas(scored, preserve_index=False)
    if not passthrough:
        return out
    kept = table.select(passthrough)
    return pa.Table.from_arrays([*kept.columns, *out.columns], names=[*passthrough, *out.column_names])


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def first_bad_cell(frame: pd.DataFrame, numeric: list[str]) -> tuple[int, str, object] | None:
    """(row, column, value) of the first cell a numeric feature cannot take: text that is not a number, or
    an infinite number; None when every numeric cell is fine."""
    best: tuple[int, str, object] | None = None
    for col in numeric:
        s = frame[col]
        if pd.api.types.is_bool_dtype(s) or not pd.api.types.is_numeric_dtype(s):
            if pd.api.types.is_datetime64_any_dtype(s):
                continue
            coerced = pd.to_numeric(s, errors="coerce")
            bad = (s.notna() & coerced.isna()).to_numpy() | np.isinf(coerced.to_numpy(dtype=np.float64))
        else:
            bad = np.isinf(s.to_numpy(dtype=np.float64, na_value=np.nan))
        hits = np.flatnonzero(bad)
        if hits.size and (best is None or hits[0] < best[0]):
            best = (int(hits[0]), col, s.iloc[int(hits[0])])
    return best


def diagnose(dataset: Dataset, shard: Shard, predictor: Predictor, error: DataError) -> str:
    """The shard's error, naming the first row (of its file) and column the model cannot take."""
    numeric = predictor.pre.numeric
    for piece in shard.pieces:
        frame = read_pieces(dataset, [Piece(piece.file, piece.row_group)]).to_pandas()
        found = first_bad_cell(frame, numeric)
        if found is None:
            continue
        row, col, value = found
        f = dataset.files[piece.file]
        before = sum(f.row_groups[: piece.row_group]) if piece.row_group is not None else 0
        what = "an infinite number" if isinstance(value, float) or _is_inf_text(value) else "not a number"
        return (
            f"row {before + row + 1} of {f.uri}, column {col!r}: {str(value)[:60]!r} is {what}; the model was trained "
            "on numbers there (a missing value is an empty cell)"
        )
    return str(error)


def _is_inf_text(value: object) -> bool:
    try:
        return bool(np.isinf(float(str(value))))
    except ValueError:
        return False


class Scorer:
    """Scores the shards of `plan` assigned to pod `pod` and commits them to `store`."""

    def __init__(
        self, plan: ScoringPlan, store: OutputStore, pod: int, log: bool = True, counters: Counters | None = None
    ) -> None:
        self.plan, self.store, self.pod, self.log = plan, store, pod, log
        self.mine = assigned(len(plan.shards), plan.parallelism, pod)
        self.counters = counters or Counters(pod=pod)
        with self.counters.lock:
            self.counters.plan_shards, self.counters.plan_rows = len(plan.shards), plan.rows
            self.counters.shards_total = len(self.mine)

    def _say(self, text: str) -> None:
        if self.log:
            print(text, flush=True)

    def run(self) -> ScoringSummary:
        committed = self.store.parts()
        todo = [self.plan.shards[k] for k in self.mine if k not in committed]
        with self.counters.lock:
            for k in self.mine:
                if k in committed:
                    self.counters.shards_done += 1
                    self.counters.shards_skipped += 1
                    self.counters.rows_done += self.plan.shards[k].rows or 0
        if committed & set(self.mine):
            self._say(f"pod {self.pod}: {len(self.mine) - len(todo)} shard(s) already committed, skipped")
        if todo:
            self._score(todo)
        return self.counters.summary(self.finish())

    def _score(self, todo: list[Shard]) -> None:
        run_dir, _, _ = open_model(self.plan.model, self.plan.model_name)
        predictor = Predictor.load(run_dir, self.plan.model_name)  # once per pod
        dataset = open_data(self.plan.data)
        if [f.uri for f in dataset.files] != self.plan.files:
            raise ScoringError(
                f"{self.plan.data}: its files changed since the plan was made; score it again with a new output",
                "InvalidData",
            )
        self.counters.started = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tabjob-prefetch")
        try:
            ahead: Future[pa.Table] = pool.submit(read_shard, dataset, todo[0])
            for i, shard in enumerate(todo):
                try:
                    table = ahead.result()
                finally:
                    if i + 1 < len(todo):
                        ahead = pool.submit(read_shard, dataset, todo[i + 1])
                self._one(dataset, predictor, shard, table)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _one(self, dataset: Dataset, predictor: Predictor, shard: Shard, table: pa.Table) -> None:
        name = part_name(shard.index)
        started = time.monotonic()
        try:
            out = score_table(predictor, table, self.plan.passthrough, f"{self.plan.data} (shard {shard.index})")
        except DataError as exc:
            message = f"shard {shard.index}: {diagnose(dataset, shard, predictor, exc)}"
            with self.counters.lock:
                self.counters.failures.append(ShardFailure(shard=shard.index, error=message[:600]))
            self._say(f"pod {self.pod}: {message}")
            return
        predicted = time.monotonic() - started
        self.store.write(name, parquet_bytes(out))
        with self.counters.lock:
            self.counters.shards_done += 1
            self.counters.rows_done += out.num_rows
            self.counters.rows_scored += out.num_rows
            self.counters.seconds_predicting += predicted
        self._say(
            f"pod {self.pod}: shard {shard.index}: {out.num_rows} rows scored in {predicted:.2f} s, "
            f"committed {self.store.uri}{name}"
        )

    def finish(self) -> bool:
        """Write the success marker when every shard of the plan is committed; whether the output is finished."""
        done = self.store.read_model(SUCCESS, SuccessMarker)
        if done is not None and done.owner == self.plan.owner:
            return True
        committed = self.store.parts()
        if any(s.index not in committed for s in self.plan.shards):
            return False
        rows = {part_name(s.index): self._rows_of(s) for s in self.plan.shards}
        marker = SuccessMarker(
            owner=self.plan.owner, fingerprint=self.plan.fingerprint, rows=sum(rows.values()), parts=rows
        )
        self.store.write(SUCCESS, marker_bytes(marker))
        self._say(f"pod {self.pod}: every shard committed: wrote {self.store.uri}{SUCCESS}")
        return True

    def _rows_of(self, shard: Shard) -> int:
        if shard.rows is not None:
            return shard.rows
        # CSV: rows are known only once read; the part's footer says how many it holds.
        return self.store.part_rows(part_name(shard.index))
