"""`tabjob predict` on a run directory it did not write: models load as data only, unknown families are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tabjob_trainer.errors import DataError
from tabjob_trainer.predictor import Predictor
from tabjob_trainer.preprocess import Preprocessor
from tabjob_trainer.problem import LabelInfo


class _Payload:
    """Pickled, it asks the loader to create a file: loading must never run it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def _run_dir(tmp: Path, key: str) -> Path:
    run = tmp / "run"
    (run / "fits" / "M.t0").mkdir(parents=True)
    pre = Preprocessor(numeric=["a"])
    label = LabelInfo(problem_type="regression", classes=[])
    (run / "preprocessing.json").write_text(json.dumps({"features": pre.to_dict(), "label": label.to_dict()}))
    (run / "models.json").write_text(json.dumps({"M": {"key": key, "fits": ["M.t0"]}}))
    (run / "leaderboard.json").write_text(json.dumps([{"model": "M", "score_val": -1.0}]))
    return run


def test_a_crafted_model_file_does_not_run_code(tmp_path: Path) -> None:
    import torch

    run = _run_dir(tmp_path, "NN_TORCH")
    marker = tmp_path / "ran"
    torch.save({"state": _Payload(marker), "config": {}}, run / "fits" / "M.t0" / "model.pt")
    with pytest.raises(DataError) as exc:
        Predictor.load(run)  # every fit the model needs is loaded here, once
    assert not marker.exists(), "loading the model ran code from the run directory"
    assert "\n" not in str(exc.value) and "cannot load the NN_TORCH model" in str(exc.value)


def test_an_unknown_model_family_is_refused_not_loaded_as_the_mlp(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"unknown model key 'FASTAI'; known keys: GBM, CAT, XGB, NN_TORCH"):
        Predictor.load(_run_dir(tmp_path, "FASTAI"))
