"""A real table with missing values, and a finished run trained on it with the real `tabjob run`.

Palmer penguins (the CSV shipped in the ``palmerpenguins`` package, a dev dependency): 344 rows, strings (island,
sex), floats with missing cells, an integer column (year) and a three-class label. The test rows are every row
with a missing cell plus every fourth other row, so the serving tests see missing values in both kinds of column.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.trainer.helpers import manifest, tabjob, write_manifest

LABEL = "species"
# The V2 datatype of each feature column, as the export advertises it: floats, the integer year, strings.
DATATYPES = {
    "bill_length_mm": "FP64",
    "bill_depth_mm": "FP64",
    "flipper_length_mm": "FP64",
    "body_mass_g": "FP64",
    "year": "INT64",
    "island": "BYTES",
    "sex": "BYTES",
}
# Small on purpose (a run takes about 20 s on two shared cores) but every kind of model: bagged LightGBM, a bagged
# MLP and the weighted ensemble over them.
MODELS = {
    "GBM": [{"hyperparameters": {"num_boost_round": 40}}],
    "NN_TORCH": [{"hyperparameters": {"num_epochs": 8, "hidden_size": 32}}],
}


def penguins() -> pd.DataFrame:
    from importlib.resources import files

    with (files("palmerpenguins") / "data" / "penguins.csv").open() as fh:
        return pd.read_csv(fh)


def split(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    test = df[df.isna().any(axis=1) | (df.index % 4 == 0)]
    return df.drop(test.index), test.drop(columns=[LABEL])


def train_run(base: Path, name: str = "penguins") -> dict[str, Path]:
    """train.csv, test.csv (no label) and a finished run directory under ``base``."""
    train, test = split(penguins())
    train.to_csv(base / "train.csv", index=False)
    test.to_csv(base / "test.csv", index=False)
    doc = manifest(str(base / "train.csv"), LABEL, MODELS, bagging={"folds": 2})
    doc["metadata"]["name"] = name
    out = base / "run"
    result = tabjob("run", str(write_manifest(base, doc)), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    board = json.loads((out / "leaderboard.json").read_text())
    assert {r["model"] for r in board} == {"GBM", "NN_TORCH", "WeightedEnsemble"}, board
    return {"train": base / "train.csv", "test": base / "test.csv", "run": out}
