"""Serve a finished run: load its preprocessing and a model (the best by default), predict new rows.

A bagged model averages its fold models; the weighted ensemble blends its members with the saved weights.
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
from tabjob_trainer.problem import LabelInfo


@dataclass
class Predictor:
    run_dir: Path
    pre: Preprocessor
    label: LabelInfo
    index: dict[str, Any]
    leaderboard: list[dict[str, Any]]

    @classmethod
    def load(cls, run_dir: str | Path) -> Predictor:
        run = Path(run_dir)
        for name in ("preprocessing.json", "models.json", "leaderboard.json"):
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
            return cls(run, Preprocessor.from_dict(prep["features"]), LabelInfo.from_dict(prep["label"]), index, board)
        except (KeyError, TypeError) as exc:
            raise DataError(f"{run}: preprocessing.json is not from this version of tabjob ({exc})") from None

    @property
    def best(self) -> str:
        for row in self.leaderboard:
            if row.get("score_val") is not None and row["model"] in self.index:
                return str(row["model"])
        raise DataError(f"{self.run_dir}: the run has no finished model")

    def _fit_model(self, fit_id: str, key: str) -> Model:
        try:
            loader = family(key).load
        except UnknownModelError as exc:
            raise DataError(f"{self.run_dir}: models.json: {exc}") from None
        directory = store.fit_dir(self.run_dir, fit_id)
        try:
            return loader(directory, self.label.problem_type)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            raise DataError(f"{directory}: cannot load the {key} model ({type(exc).__name__}: {first})") from None

    def predict_raw(self, x: Encoded, model: str | None = None) -> np.ndarray:
        name = model or self.best
        if name not in self.index:
            raise DataError(f"{self.run_dir}: no model {name!r}; choose one of {', '.join(self.index)}")
        entry = self.index[name]
        if entry["key"] == "ENSEMBLE":
            parts = [(self.predict_raw(x, member), w) for member, w in entry["weights"].items()]
            return np.asarray(sum(p * w for p, w in parts))
        preds = [self._fit_model(fid, entry["key"]).predict(x) for fid in entry["fits"]]
        return np.asarray(np.mean(preds, axis=0))

    def predict_frame(self, df: pd.DataFrame, source: str, model: str | None = None) -> pd.DataFrame:
        raw = self.predict_raw(self.pre.transform(df, source), model)
        problem = self.label.problem_type
        if problem == "regression":
            return pd.DataFrame({"prediction": raw})
        labels = self.label.decode(to_labels(raw, problem))
        probs = np.column_stack([1 - raw, raw]) if problem == "binary" else raw
        out = pd.DataFrame({"prediction": labels})
        for i, cls in enumerate(self.label.classes):
            out[f"proba_{cls}"] = probs[:, i]
        return out


def output_target(run_dir: str, output: str | None) -> Path:
    """Where predictions go, checked before any work: a CSV file in a directory that exists."""
    target = Path(output) if output else Path(run_dir) / "predictions.csv"
    if target.is_dir():
        example = target / "predictions.csv"
        raise DataError(f"--output {target}: is a directory; name the CSV file to write, e.g. {example}")
    if not target.parent.is_dir():
        raise DataError(f"--output {target}: directory {target.parent} does not exist")
    return target


def predict_file(run_dir: str, data: str, output: str | None, model: str | None = None) -> tuple[pd.DataFrame, str]:
    predictor = Predictor.load(run_dir)
    target = output_target(run_dir, output)
    frame = predictor.predict_frame(read_table(data), data, model)
    atomic_write(target, frame.to_csv(index=False).encode())
    return frame, str(target)
