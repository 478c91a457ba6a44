"""The torch networks' loop (models/network.py) stops a single-process fit at its deadline after the batch in hand,
not at the epoch's end: one epoch of a wide network on a big fold outlasted the time kept after the base models,
and the refit and its guard against the floor never ran."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from tabjob_trainer.models import network
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.models.registry import family
from tabjob_trainer.preprocess import Preprocessor

BATCH = 8
ROWS = 200  # training rows: 25 batches an epoch


def _fit(key: str, deadline: float | None, monkeypatch: pytest.MonkeyPatch) -> tuple[int, Any]:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=ROWS + 100), "noise": rng.normal(size=ROWS + 100)})
    y = (df["x"] > 0).to_numpy(np.int64)
    pre = Preprocessor.fit(df, "none")
    x = pre.transform(df)
    steps: list[int] = []
    member_loss = network._member_loss

    def counted(*args: Any, **kwargs: Any) -> Any:
        if torch.is_grad_enabled():  # a training step; scoring the validation rows runs without gradients
            steps.append(1)
        return member_loss(*args, **kwargs)

    monkeypatch.setattr(network, "_member_loss", counted)
    hp: dict[str, Any] = {"num_epochs": 3, "batch_size": BATCH, "patience": 100}
    if key == "TABM":
        hp.update({"k": 4, "d_block": 32})
    ctx = FitContext(fit_id="d", hyperparameters=hp, seed=0, threads=1, device="cpu", problem="binary", n_classes=2,
                     metric="roc_auc", feature_names=pre.feature_names, cardinalities=pre.cardinalities,
                     deadline=deadline)  # fmt: skip
    train, val = np.arange(ROWS), np.arange(ROWS, ROWS + 100)
    trained = family(key).fit(ctx, x.take(train), y[train], x.take(val), y[val])
    return len(steps), trained


@pytest.mark.parametrize("key", ["NN_TORCH", "TABM"])
def test_a_fit_past_its_deadline_stops_after_the_batch_in_hand(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    steps, trained = _fit(key, time.time() - 1, monkeypatch)
    assert steps == 1, "one batch, not the epoch's 25"
    assert trained is not None and len(trained.curve["val"]) == 1  # scored once, then stopped


@pytest.mark.parametrize("key", ["NN_TORCH", "TABM"])
def test_a_fit_with_time_left_trains_every_batch_of_every_epoch(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    steps, trained = _fit(key, time.time() + 3600, monkeypatch)
    assert steps == 3 * math.ceil(ROWS / BATCH)
    assert trained is not None and len(trained.curve["val"]) == 3
