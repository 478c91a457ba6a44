"""TABM: TabM's k members trained as one network through the MLP's loop, saved and loaded, on CPU and GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import TensorDataset

from tabjob_trainer.metrics import score
from tabjob_trainer.models import network, tabm
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.models.registry import family
from tabjob_trainer.preprocess import Encoded, Preprocessor
from tabjob_trainer.problem import ProblemType


def _ctx(problem: ProblemType, n_classes: int, metric: str, pre: Preprocessor, **hp: Any) -> FitContext:
    return FitContext(
        fit_id="t",
        hyperparameters={"num_epochs": 30, "k": 4, "d_block": 32, **hp},
        seed=0,
        threads=1,
        device="cpu",
        problem=problem,
        n_classes=n_classes,
        metric=metric,
        feature_names=pre.feature_names,
        cardinalities=pre.cardinalities,
    )


def _table(n: int, columns: str = "both", seed: int = 0) -> tuple[Encoded, np.ndarray, Preprocessor]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    colour = rng.choice(["red", "green", "blue"], size=n)
    frame: dict[str, Any] = {}
    if columns in ("both", "numeric"):
        frame["x"] = np.where(rng.random(n) < 0.1, np.nan, x)
        frame["noise"] = rng.lognormal(sigma=2.0, size=n)
    if columns in ("both", "categorical"):
        frame["colour"] = colour
    y = ((np.nan_to_num(x) if columns != "categorical" else 0.0) + 2.0 * (colour == "red") > 0.5).astype(np.int64)
    df = pd.DataFrame(frame)
    pre = Preprocessor.fit(df, "none")
    return pre.transform(df), y, pre


def test_members_are_an_axis_and_the_prediction_is_their_mean_probability(tmp_path: Path) -> None:
    x, y, pre = _table(300)
    train, val = np.arange(200), np.arange(200, 300)
    trained = family("TABM").fit(_ctx("binary", 2, "roc_auc", pre), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None
    model = trained.model
    assert isinstance(model, network.NetworkModel)
    num, cat = model._inputs(x.take(val))
    logits = model.logits(num, cat, 64)
    assert logits.shape == (100, 4, 1)  # rows, k members, outputs
    members = torch.sigmoid(logits[..., 0]).numpy()
    pred = model.predict(x.take(val))
    np.testing.assert_allclose(pred, members.mean(axis=1), rtol=1e-6)
    assert not np.allclose(members[:, 0], members[:, 1])  # k models, not one model repeated
    assert score("roc_auc", "binary", y[val], pred, 2) > 0.8
    # Saved and loaded (weights only, the bins in its config), it predicts the same.
    model.save(tmp_path)
    loaded = family("TABM").load(tmp_path, "binary")
    np.testing.assert_allclose(loaded.predict(x.take(val)), pred, rtol=1e-6)


@pytest.mark.parametrize("columns", ["numeric", "categorical"])
def test_a_table_of_one_kind_of_column_trains(columns: str) -> None:
    x, y, pre = _table(200, columns)
    train, val = np.arange(150), np.arange(150, 200)
    trained = family("TABM").fit(_ctx("binary", 2, "accuracy", pre), x.take(train), y[train], x.take(val), y[val])
    assert trained is not None and np.isfinite(trained.model.predict(x.take(val))).all()


def test_multiclass_probabilities_sum_to_one_and_regression_stays_in_range() -> None:
    x, y, pre = _table(240)
    y3 = (y + (x.numeric[:, 1] > 1.0)).astype(np.int64)
    train, val = np.arange(180), np.arange(180, 240)
    trained = family("TABM").fit(_ctx("multiclass", 3, "accuracy", pre), x.take(train), y3[train], x.take(val),
                                 y3[val])  # fmt: skip
    assert trained is not None
    proba = trained.model.predict(x.take(val))
    assert proba.shape == (60, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    target = np.nan_to_num(x.numeric[:, 0]) * 3.0
    reg = family("TABM").fit(_ctx("regression", 0, "rmse", pre), x.take(train), target[train], x.take(val),
                             target[val])  # fmt: skip
    assert reg is not None
    pred = reg.model.predict(x.take(val))
    margin = 0.05 * (target[train].max() - target[train].min())
    assert pred.min() >= target[train].min() - margin - 1e-9 and pred.max() <= target[train].max() + margin + 1e-9


def test_bins_are_increasing_and_a_constant_column_gets_one() -> None:
    numeric = torch.tensor([[0.0, 5.0], [1.0, 5.0], [2.0, 5.0], [3.0, 5.0]])
    bins = tabm.quantile_bins(numeric, 48)
    assert bins[1] == [4.0, 6.0]
    assert all(b > a for a, b in zip(bins[0], bins[0][1:], strict=False)) and bins[0][0] == 0.0 and bins[0][-1] == 3.0


def test_bins_stay_strictly_increasing_in_the_embeddings_float32() -> None:
    # Quantiles 1e-9 apart in float64 are one float32: three of four TABM fits failed on real tables (diabetes,
    # anes96_vote, digits) with rtdl's "bin edges are not sorted" before the edges were made unique in float32.
    close = torch.tensor([[1.0 + i * 1e-9] for i in range(200)] + [[2.0 + i] for i in range(200)], dtype=torch.float64)
    edges = torch.tensor(tabm.quantile_bins(close, 48)[0], dtype=torch.float32)
    assert bool((edges[1:] > edges[:-1]).all())
    tabm.TabMNet({"bins": [edges.tolist()], "d_embedding": 4, "cardinalities": [], "n_out": 1, "k": 2,
                  "d_block": 8, "n_blocks": 1, "dropout_prob": 0.0})  # fmt: skip


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none visible on this machine)")
def test_tabm_trains_on_the_gpu_with_amp_and_says_so() -> None:
    x, y, pre = _table(400)
    train, val = np.arange(300), np.arange(300, 400)
    ctx = _ctx("binary", 2, "roc_auc", pre)
    ctx.device = "cuda:0"
    trained = family("TABM").fit(ctx, x.take(train), y[train], x.take(val), y[val])
    assert trained is not None and trained.device == "cuda:0"
    assert trained.extra["amp"] in ("bfloat16", "float16")
    assert score("roc_auc", "binary", y[val], trained.model.predict(x.take(val)), 2) > 0.8


def test_every_member_walks_its_own_shuffle_of_the_rows() -> None:
    rows = torch.arange(10)
    data = TensorDataset(rows.float().unsqueeze(1), torch.zeros((10, 0), dtype=torch.long), rows)
    steps = list(network._member_batches(data, 3, 4, torch.Generator().manual_seed(0)))
    assert [tuple(s[0].shape) for s in steps] == [(4, 3, 1), (4, 3, 1), (2, 3, 1)]  # (rows, members, columns)
    seen = torch.cat([s[2] for s in steps])  # (rows, members): which row each member saw at each step
    for member in range(3):
        assert sorted(seen[:, member].tolist()) == list(range(10))  # every row once an epoch
    assert not torch.equal(seen[:, 0], seen[:, 1])
    assert torch.equal(torch.cat([s[0] for s in steps])[..., 0].long(), seen)  # a row's columns go with its target


def _backbone(model: Any) -> str:
    assert isinstance(model, network.NetworkModel) and isinstance(model.net, tabm.TabMNet)
    return type(model.net.net.backbone).__name__


@pytest.mark.parametrize("arch_type", ["tabm", "tabm-mini"])
def test_own_shuffles_and_gradient_clipping_train_a_model_that_reloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arch_type: str
) -> None:
    clipped: list[float] = []
    shuffles: list[int] = []
    clip, member_batches = torch.nn.utils.clip_grad_norm_, network._member_batches

    def clip_spy(parameters: Any, max_norm: float, *args: Any, **kwargs: Any) -> torch.Tensor:
        clipped.append(max_norm)
        return clip(parameters, max_norm, *args, **kwargs)

    def batches_spy(data: Any, members: int, batch: int, generator: torch.Generator) -> Any:
        shuffles.append(members)
        return member_batches(data, members, batch, generator)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip_spy)
    monkeypatch.setattr(network, "_member_batches", batches_spy)
    x, y, pre = _table(300)
    train, val = np.arange(200), np.arange(200, 300)
    ctx = _ctx("binary", 2, "roc_auc", pre, arch_type=arch_type, share_batches=False, gradient_clip=0.5)
    trained = family("TABM").fit(ctx, x.take(train), y[train], x.take(val), y[val])
    assert trained is not None
    assert shuffles and set(shuffles) == {4}  # k members, each its own shuffle, every epoch
    assert clipped and set(clipped) == {0.5}
    backbone = {"tabm": "MLPBackboneBatchEnsemble", "tabm-mini": "MLPBackboneMiniEnsemble"}[arch_type]
    assert _backbone(trained.model) == backbone
    pred = trained.model.predict(x.take(val))
    assert score("roc_auc", "binary", y[val], pred, 2) > 0.8
    trained.model.save(tmp_path)
    loaded = family("TABM").load(tmp_path, "binary")
    assert _backbone(loaded) == backbone
    np.testing.assert_allclose(loaded.predict(x.take(val)), pred, rtol=1e-6)


def test_the_defaults_are_the_authors_tabm_mini_with_own_shuffles_clipping_and_the_papers_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clipped: list[float] = []
    batches: list[tuple[int, int]] = []
    clip, member_batches = torch.nn.utils.clip_grad_norm_, network._member_batches

    def clip_spy(parameters: Any, max_norm: float, *args: Any, **kwargs: Any) -> torch.Tensor:
        clipped.append(max_norm)
        return clip(parameters, max_norm, *args, **kwargs)

    def batches_spy(data: Any, members: int, batch: int, generator: torch.Generator) -> Any:
        batches.append((members, batch))
        return member_batches(data, members, batch, generator)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip_spy)
    monkeypatch.setattr(network, "_member_batches", batches_spy)
    x, y, pre = _table(200)
    train, val = np.arange(150), np.arange(150, 200)
    ctx = _ctx("binary", 2, "roc_auc", pre, num_epochs=2)  # small k and width, the rest the family's defaults
    trained = family("TABM").fit(ctx, x.take(train), y[train], x.take(val), y[val])
    assert trained is not None
    assert _backbone(trained.model) == "MLPBackboneMiniEnsemble"
    assert batches and set(batches) == {(4, 32)}  # every member its own shuffle, 32 rows for 150 training rows
    assert clipped and set(clipped) == {1.0}


@pytest.mark.parametrize(
    ("rows", "batch"), [(150, 32), (2_799, 32), (2_800, 64), (4_500, 128), (10_000, 256), (50_000, 512), (10**6, 1024)]
)
def test_tabms_auto_batch_follows_the_papers_table(rows: int, batch: int) -> None:
    assert tabm.tabm_batch(rows) == batch
