"""Serve a finished run: load its preprocessing and one model (the best by default) once, then predict new rows.

A bagged model averages its fold models; the weighted ensemble blends its members with the saved weights.
``Predictor.load`` reads every fit the chosen model needs into memory, so ``predict_frame`` does no disk I/O and
keeps no state between calls: `tabjob predict`, the MLServer runtime and any number of threads share one instance.
(LightGBM's C API takes a shared lock for prediction and builds its predictor per call; the MLP's predict runs
under ``torch.no_grad`` and only ever sets its module to evaluation mode, the same value on every call.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tabjob_trainer import store
from tabjob_trainer.dataset import read_table
from tabjob_trainer.durable import atomic_write, read_json_object
from tabjob_trainer.errors import DataError
from tabjob_trainer.metrics import to_labels
from tabjob_trainer.models.base import Model
from tabjob_trainer.models.registry import UnknownModelError, family
from tabjob_trainer.preprocess import Encoded, Preprocessor
from tabjob_trainer.problem import LabelInfo, ProblemType
from tabjob_trainer.stacking import augment, features
from tabjob_trainer.storage.filesystems import StorageError, filesystem, identity, is_object_uri
from tabjob_trainer.storage.run_reader import open_run

ENSEMBLE_KEY = "ENSEMBLE"
STACK_KEY = "STACK"  # tabjob_trainer.stacking: its base models, then its own fold models (key "stacker")
RUN_FILES = ("preprocessing.json", "models.json", "leaderboard.json")


@dataclass(frozen=True)
class RunFiles:
    """What a finished run's directory says about itself, no model loaded: preprocessing, label, model index."""

    run_dir: Path
    pre: Preprocessor
    label: LabelInfo
    index: dict[str, Any]
    leaderboard: list[dict[str, Any]]
    preprocessing: dict[str, Any]  # preprocessing.json as written, so an export can carry it unchanged

    @classmethod
    def read(cls, run_dir: str | Path) -> RunFiles:
        run = Path(run_dir)
        for name in RUN_FILES:
            if not (run / name).exists():
                raise DataError(f"{run}: not a finished tabjob run ({name} is missing)")
        prep, index = read_json_object(run / "preprocessing.json"), read_json_object(run / "models.json")
        try:
            board = json.loads((run / "leaderboard.json").read_text())
        except (OSError, ValueError):
            board = None
        if prep is None or index is None or not isinstance(board, list):
            raise DataError(f"{run}: the run's result files are unreadable (cut short?); run the job again")
        try:
            pre, label = Preprocessor.from_dict(prep["features"]), LabelInfo.from_dict(prep["label"])
        except (KeyError, TypeError) as exc:
            raise DataError(f"{run}: preprocessing.json is not from this version of tabjob ({exc})") from None
        return cls(run, pre, label, index, board, prep)

    @property
    def best(self) -> str:
        for row in self.leaderboard:
            if row.get("score_val") is not None and row["model"] in self.index:
                return str(row["model"])
        raise DataError(f"{self.run_dir}: the run has no finished model")

    def models_needed(self, name: str) -> list[str]:
        """``name`` and, for an ensemble, its members: every index entry predicting with ``name`` reads."""
        if name not in self.index:
            raise DataError(f"{self.run_dir}: no model {name!r}; choose one of {', '.join(self.index)}")
        entry = self.index[name]
        members = entry["weights"] if entry["key"] == ENSEMBLE_KEY else entry.get("base", [])
        needed = [name]
        for member in members:
            needed += [m for m in self.models_needed(member) if m not in needed]
        return needed

    def fits_needed(self, name: str) -> dict[str, str]:
        """fit id -> model key, for every fit predicting with ``name`` loads."""
        fits: dict[str, str] = {}
        for model in self.models_needed(name):
            entry = self.index[model]
            if entry["key"] != ENSEMBLE_KEY:
                key = entry["stacker"] if entry["key"] == STACK_KEY else entry["key"]
                fits.update({str(fid): str(key) for fid in entry["fits"]})
        return fits

    def output_columns(self) -> list[str]:
        """The columns of a prediction frame: ``prediction``, then ``proba_<class>`` per class when classifying."""
        if self.label.problem_type == "regression":
            return ["prediction"]
        return ["prediction"] + [f"proba_{cls}" for cls in self.label.classes]


def load_fit(run_dir: Path, fit_id: str, key: str, problem: ProblemType) -> Model:
    """One fit's model from its directory; any failure is a one-line DataError naming the directory."""
    try:
        loader = family(key).load
    except UnknownModelError as exc:
        raise DataError(f"{run_dir}: models.json: {exc}") from None
    directory = store.fit_dir(run_dir, fit_id)
    try:
        model = loader(directory, problem)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise DataError(f"{directory}: cannot load the {key} model ({type(exc).__name__}: {first})") from None
    return model


class Predictor:
    """One model of a finished run with every fit it needs in memory."""

    def __init__(self, files: RunFiles, model: str, fits: dict[str, Model]) -> None:
        self.files = files
        self.model = model
        self.fits = fits

    @classmethod
    def load(cls, run_dir: str | Path, model: str | None = None) -> Predictor:
        files = RunFiles.read(run_dir)
        name = model or files.best
        needed = files.fits_needed(name)
        problem = files.label.problem_type
        return cls(files, name, {fid: load_fit(files.run_dir, fid, key, problem) for fid, key in needed.items()})

    @property
    def run_dir(self) -> Path:
        return self.files.run_dir

    @property
    def pre(self) -> Preprocessor:
        return self.files.pre

    @property
    def label(self) -> LabelInfo:
        return self.files.label

    def predict_raw(self, x: Encoded, model: str | None = None) -> np.ndarray:
        """Probabilities (binary: of the second class; multiclass: one column per class) or regression values."""
        entry = self.files.index[model or self.model]
        if entry["key"] == ENSEMBLE_KEY:
            parts = [(self.predict_raw(x, member), w) for member, w in entry["weights"].items()]
            return np.asarray(sum(p * w for p, w in parts))
        if entry["key"] == STACK_KEY:
            x = augment(x, features([self.predict_raw(x, base) for base in entry["base"]]))
        return np.asarray(np.mean([self.fits[fid].predict(x) for fid in entry["fits"]], axis=0))

    def predict_frame(self, df: pd.DataFrame, source: str) -> pd.DataFrame:
        return self.frame_of(self.predict_raw(self.pre.transform(df, source)))

    def frame_of(self, raw: np.ndarray) -> pd.DataFrame:
        """The prediction frame (``RunFiles.output_columns``) from raw model outputs."""
        problem = self.label.problem_type
        if problem == "regression":
            return pd.DataFrame({"prediction": raw})
        labels = self.label.decode(to_labels(raw, problem))
        probs = np.column_stack([1 - raw, raw]) if problem == "binary" else raw
        out = pd.DataFrame({"prediction": labels})
        for i, cls in enumerate(self.label.classes):
            out[f"proba_{cls}"] = probs[:, i]
        return out


def output_target(run_dir: str | Path, output: str | None) -> str:
    """Where predictions go, checked before any work: a CSV or Parquet file in a directory that exists, or an object
    URI (s3://, gs://). A run read from a bucket is never written to: its predictions need --output."""
    if output is not None and is_object_uri(output):
        if output.endswith("/"):
            raise DataError(
                f"--output {output}: names a prefix; name the object to write, e.g. {output}predictions.csv"
            )
        return output
    if output is None and is_object_uri(str(run_dir)):
        raise DataError(
            f"--output: name where the predictions go (a local .csv or .parquet file, or an s3:// or gs:// URI); "
            f"{run_dir} is a committed run and is not written to"
        )
    target = Path(output) if output else Path(run_dir) / "predictions.csv"
    if target.is_dir():
        example = target / "predictions.csv"
        raise DataError(f"--output {target}: is a directory; name the CSV file to write, e.g. {example}")
    if not target.parent.is_dir():
        raise DataError(f"--output {target}: directory {target.parent} does not exist")
    return str(target)


def frame_bytes(frame: pd.DataFrame, target: str) -> bytes:
    """The predictions as the target's suffix asks: Parquet for .parquet/.pq, else CSV."""
    if target.lower().endswith((".parquet", ".pq")):
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink)
        return bytes(sink.getvalue().to_pybytes())
    return frame.to_csv(index=False).encode()


def write_predictions(frame: pd.DataFrame, target: str) -> None:
    data = frame_bytes(frame, target)
    if not is_object_uri(target):
        atomic_write(Path(target), data)
        return
    fs, path = filesystem(target)
    try:
        with fs.open_output_stream(path) as out:  # an object appears whole when its upload completes
            out.write(data)
    except OSError as exc:
        raise StorageError(f"{target}: cannot write it as {identity()}: {str(exc).splitlines()[0]}") from None


def predict_file(run_dir: str, data: str, output: str | None, model: str | None = None) -> tuple[pd.DataFrame, str]:
    target = output_target(run_dir, output)
    predictor = Predictor.load(open_run(run_dir), model)
    frame = predictor.predict_frame(read_table(data), data)
    write_predictions(frame, target)
    return frame, target
