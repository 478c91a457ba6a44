"""NN_TORCH: an MLP over standardised numeric columns and categorical embeddings.

Early stopping on the validation metric; AMP (bf16 where supported, else fp16 with a grad scaler) on GPU unless
``amp: false`` (full fp32, e.g. to compare speed or rule out precision);
processes > 1 trains with DistributedDataParallel (gloo on CPU, nccl on GPU) and a DistributedSampler, with
the learning rate scaled for the larger global batch (``lr_scaling``: ``sqrt`` (default), ``linear`` or
``none``). Only the fit's first rank evaluates; it broadcasts the stop decision each epoch and the best
weights at the end, so every rank finishes on the same epoch with the same model. On CUDA out-of-memory a
single-process fit halves its batch and starts again instead of failing.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DistributedSampler, TensorDataset

from tabjob_trainer.metrics import score
from tabjob_trainer.models.base import FitContext, Trained
from tabjob_trainer.preprocess import Encoded

DEFAULTS: dict[str, Any] = {
    "num_epochs": 30,
    "patience": 5,
    "batch_size": 256,
    "learning_rate": 3e-3,
    "weight_decay": 1e-5,
    "hidden_size": 128,
    "num_layers": 2,
    "dropout_prob": 0.1,
    "lr_scaling": "sqrt",
    "max_embedding_dim": 16,
    "amp": True,
}
_MIN_BATCH = 8


def embedding_dim(cardinality: int, cap: int) -> int:
    # fast.ai's rule of thumb, capped: enough capacity for rare categories without blowing up width.
    return int(min(cap, round(1.6 * (cardinality + 1) ** 0.56)))


def scaled_lr(lr: float, world: int, rule: str) -> float:
    if rule == "linear":
        return lr * world
    if rule == "sqrt":
        return lr * math.sqrt(world)
    if rule == "none":
        return lr
    raise ValueError(f"lr_scaling must be linear, sqrt or none, not {rule!r}")


class TabularMLP(nn.Module):
    def __init__(
        self, n_numeric: int, cardinalities: list[int], n_out: int, hidden: int, layers: int, dropout: float, cap: int
    ) -> None:
        super().__init__()
        # Row 0 of every embedding is "missing or unseen"; known categories are shifted by one.
        dims = [embedding_dim(c, cap) for c in cardinalities]
        self.embeddings = nn.ModuleList([nn.Embedding(c + 1, d) for c, d in zip(cardinalities, dims, strict=True)])
        width = n_numeric + sum(dims)
        blocks: list[nn.Module] = []
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        blocks.append(nn.Linear(width, n_out))
        self.body = nn.Sequential(*blocks)

    def forward(self, numeric: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        parts = [numeric] + [emb(categorical[:, i]) for i, emb in enumerate(self.embeddings)]
        out: torch.Tensor = self.body(torch.cat(parts, dim=1) if len(parts) > 1 else numeric)
        return out


class MLPModel:
    def __init__(self, net: TabularMLP, config: dict[str, Any], problem: str) -> None:
        self.net = net
        self.config = config  # mean/std of inputs and target, architecture
        self.problem = problem

    def _inputs(self, x: Encoded) -> tuple[torch.Tensor, torch.Tensor]:
        mean = np.asarray(self.config["mean"], dtype=np.float32)
        std = np.asarray(self.config["std"], dtype=np.float32)
        num = np.nan_to_num((x.numeric - mean) / std, nan=0.0).astype(np.float32)
        return torch.from_numpy(num), torch.from_numpy(x.categorical + 1)

    def predict(self, x: Encoded, batch: int = 8192) -> np.ndarray:
        self.net.eval()
        num, cat = self._inputs(x)
        device = next(self.net.parameters()).device
        outs = []
        with torch.no_grad():
            for i in range(0, len(num), batch):
                outs.append(self.net(num[i : i + batch].to(device), cat[i : i + batch].to(device)).float().cpu())
        logits = torch.cat(outs) if outs else torch.empty(0, self.config["n_out"])
        return _to_prediction(logits, self.problem, self.config)

    def save(self, directory: Path) -> None:
        buf = io.BytesIO()
        torch.save({"state": self.net.state_dict(), "config": self.config}, buf)
        (directory / "model.pt").write_bytes(buf.getvalue())

    @classmethod
    def load(cls, directory: Path, problem: str) -> MLPModel:
        blob = torch.load(directory / "model.pt", map_location="cpu", weights_only=False)
        cfg = blob["config"]
        net = _build(cfg)
        net.load_state_dict(blob["state"])
        return cls(net, cfg, problem)


def _build(cfg: dict[str, Any]) -> TabularMLP:
    return TabularMLP(
        len(cfg["mean"]),
        cfg["cardinalities"],
        cfg["n_out"],
        cfg["hidden_size"],
        cfg["num_layers"],
        cfg["dropout_prob"],
        cfg["max_embedding_dim"],
    )


def _to_prediction(logits: torch.Tensor, problem: str, cfg: dict[str, Any]) -> np.ndarray:
    if problem == "binary":
        return torch.sigmoid(logits[:, 0]).numpy().astype(np.float64)
    if problem == "multiclass":
        return torch.softmax(logits, dim=1).numpy().astype(np.float64)
    return (logits[:, 0].numpy() * cfg["y_std"] + cfg["y_mean"]).astype(np.float64)


def _loss(problem: str) -> nn.Module:
    if problem == "binary":
        return nn.BCEWithLogitsLoss()
    if problem == "multiclass":
        return nn.CrossEntropyLoss()
    return nn.MSELoss()


def _targets(y: np.ndarray, problem: str, cfg: dict[str, Any]) -> torch.Tensor:
    if problem == "binary":
        return torch.from_numpy(y.astype(np.float32)).unsqueeze(1)
    if problem == "multiclass":
        return torch.from_numpy(y.astype(np.int64))
    return torch.from_numpy(((y - cfg["y_mean"]) / cfg["y_std"]).astype(np.float32)).unsqueeze(1)


def fit(ctx: FitContext, train: Encoded, y_train: np.ndarray, val: Encoded, y_val: np.ndarray) -> Trained | None:
    hp = {**DEFAULTS, **ctx.hyperparameters}
    batch = int(hp["batch_size"])
    while True:
        try:
            return _fit(ctx, hp, batch, train, y_train, val, y_val)
        except torch.cuda.OutOfMemoryError:
            # Ranks of a DDP fit would have to agree on the new batch size; only single-process fits retry.
            if ctx.distributed or batch // 2 < _MIN_BATCH:
                raise
            batch //= 2
            torch.cuda.empty_cache()


def _fit(
    ctx: FitContext,
    hp: dict[str, Any],
    batch: int,
    train: Encoded,
    y_train: np.ndarray,
    val: Encoded,
    y_val: np.ndarray,
) -> Trained | None:
    torch.manual_seed(ctx.seed)
    device = torch.device(ctx.device)
    numeric = train.numeric.astype(np.float64)
    mean = np.nan_to_num(np.nanmean(numeric, axis=0)) if numeric.size else np.zeros(0)
    std = np.nan_to_num(np.nanstd(numeric, axis=0), nan=1.0) if numeric.size else np.zeros(0)
    std[std == 0] = 1.0
    n_out = ctx.n_classes if ctx.problem == "multiclass" else 1
    cfg: dict[str, Any] = {
        **{k: hp[k] for k in ("hidden_size", "num_layers", "dropout_prob", "max_embedding_dim")},
        "mean": mean.tolist(),
        "std": std.tolist(),
        "cardinalities": ctx.cardinalities,
        "n_out": n_out,
        "y_mean": float(np.mean(y_train)) if ctx.problem == "regression" else 0.0,
        "y_std": float(np.std(y_train) or 1.0) if ctx.problem == "regression" else 1.0,
        "batch_size": batch,
    }
    net = _build(cfg).to(device)
    model = MLPModel(net, cfg, ctx.problem)
    world = len(ctx.ranks)
    wrapped: nn.Module = net
    if ctx.distributed:
        from torch.nn.parallel import DistributedDataParallel

        wrapped = DistributedDataParallel(
            net, device_ids=[device.index] if device.type == "cuda" else None, process_group=ctx.group
        )
    num, cat = model._inputs(train)
    data = TensorDataset(num, cat, _targets(y_train, ctx.problem, cfg))
    sampler: DistributedSampler[Any] | None = (
        DistributedSampler(data, num_replicas=world, rank=ctx.ranks.index(ctx.rank), shuffle=True, seed=ctx.seed)
        if ctx.distributed
        else None
    )
    generator = torch.Generator().manual_seed(ctx.seed)
    lr = scaled_lr(float(hp["learning_rate"]), world, str(hp["lr_scaling"]))
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=float(hp["weight_decay"]))
    loss_fn = _loss(ctx.problem)
    amp_dtype = _amp_dtype(device) if bool(hp["amp"]) else None
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)

    best_score, best_state, best_epoch, bad_epochs = -math.inf, None, 0, 0
    curve: dict[str, Any] = {"metric": ctx.metric, "train_loss": [], "val": []}
    epochs = int(hp["num_epochs"])
    for epoch in range(epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        wrapped.train()
        total, seen = 0.0, 0
        for xb_num, xb_cat, yb in _batches(data, sampler, batch, generator):
            xb_num, xb_cat, yb = xb_num.to(device), xb_cat.to(device), yb.to(device)
            opt.zero_grad(set_to_none=True)
            amp = amp_dtype is not None
            with torch.autocast(device_type=device.type, dtype=amp_dtype or torch.float32, enabled=amp):
                loss = loss_fn(wrapped(xb_num, xb_cat), yb)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            total += float(loss.detach()) * len(yb)
            seen += len(yb)
        stop = False
        if ctx.leader:
            val_score = score(ctx.metric, ctx.problem, y_val, model.predict(val), ctx.n_classes)
            curve["train_loss"].append(total / max(seen, 1))
            curve["val"].append(val_score)
            if val_score > best_score:
                best_score, best_epoch, bad_epochs = val_score, epoch, 0
                best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
            else:
                bad_epochs += 1
            left = ctx.time_left()
            stop = bad_epochs >= int(hp["patience"]) or (left is not None and left <= 0)
        if ctx.distributed:
            stop = _broadcast(stop, ctx)
        if stop:
            break
    if ctx.leader and best_state is not None:
        net.load_state_dict(best_state)
    if ctx.distributed:
        # Every rank ends with the leader's best weights (they may later predict or be saved by any rank).
        for tensor in net.state_dict().values():
            dist.broadcast(tensor, src=ctx.ranks[0], group=ctx.group)
    if not ctx.leader:
        return None
    net.cpu()
    return Trained(
        model=model,
        device=str(device),
        curve=curve,
        importance=permutation_importance(model, val, y_val, ctx),
        best_iteration=best_epoch + 1,
        extra={"batch_size": batch, "learning_rate": lr, "world": world, "amp": _dtype_name(amp_dtype)},
    )


def permutation_importance(
    model: MLPModel, val: Encoded, y_val: np.ndarray, ctx: FitContext, rows: int = 2000, max_features: int = 100
) -> dict[str, float]:
    """Drop in the validation score when one column is shuffled: the MLP's feature importance.

    Bounded (at most ``rows`` rows and ``max_features`` columns) so it stays a small fraction of the fit.
    """
    rng = np.random.default_rng(ctx.seed)
    take = rng.permutation(len(y_val))[:rows]
    x, y = val.take(take), y_val[take]
    base = score(ctx.metric, ctx.problem, y, model.predict(x), ctx.n_classes)
    n_num = x.numeric.shape[1]
    out: dict[str, float] = {}
    for j, name in enumerate(ctx.feature_names[:max_features]):
        shuffled = Encoded(x.numeric.copy(), x.categorical.copy())
        if j < n_num:
            shuffled.numeric[:, j] = rng.permutation(shuffled.numeric[:, j])
        else:
            shuffled.categorical[:, j - n_num] = rng.permutation(shuffled.categorical[:, j - n_num])
        out[name] = base - score(ctx.metric, ctx.problem, y, model.predict(shuffled), ctx.n_classes)
    return out


def _batches(
    data: TensorDataset, sampler: DistributedSampler[Any] | None, batch: int, generator: torch.Generator
) -> Iterator[tuple[torch.Tensor, ...]]:
    """Shuffled batches sliced from the whole tensors at once.

    A DataLoader over a TensorDataset fetches and collates row by row in Python, which on tabular data costs
    more than the forward and backward passes; one index per batch keeps the epoch in C++. The
    DistributedSampler still decides which rows each rank sees, so DDP semantics are unchanged.
    """
    n = len(data.tensors[0])
    order = torch.tensor(list(sampler)) if sampler is not None else torch.randperm(n, generator=generator)
    for start in range(0, len(order), batch):
        idx = order[start : start + batch]
        yield tuple(t[idx] for t in data.tensors)


def _amp_dtype(device: torch.device) -> torch.dtype | None:
    if device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def _dtype_name(dtype: torch.dtype | None) -> str:
    return "off" if dtype is None else str(dtype).removeprefix("torch.")


def _broadcast(flag: bool, ctx: FitContext) -> bool:
    box = [flag]
    dist.broadcast_object_list(box, src=ctx.ranks[0], group=ctx.group)
    return bool(box[0])
