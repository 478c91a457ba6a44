"""The training loop the torch network families share (NN_TORCH's MLP, TabM), and the model it saves.

A family gives a ``Network``: its facts (the defaults among them), what a saved model keeps, and how the module is
built from that. Training follows what makes AutoGluon's tabular MLP strong on small tables: a batch size that grows
with the rows (several steps per epoch on a few hundred rows), many cheap epochs with early stopping on the validation
fold's metric (ties broken by the validation loss) and a patience that grows with the best epoch so far, the learning
rate halved whenever the validation score stalls, a robust loss for regression and predictions kept within the
training target's range. A network whose output has a members axis (rows, k, outputs: TabM) trains each member on its
own loss and predicts as the mean of its members. AMP (bf16 where supported, else fp16 with a grad scaler) on GPU
unless ``amp: false`` (full fp32, e.g. to compare speed or rule out precision); processes > 1 trains with
DistributedDataParallel (gloo on CPU, nccl on GPU) and a DistributedSampler (read sharded, each rank iterates only its
own rows: sharded/network.py), with the learning rate scaled for the larger global batch (``lr_scaling``: ``sqrt``
(default), ``linear`` or ``none``). Only the fit's first rank scores the validation rows (over shards, every rank's
predictions of its own); it broadcasts the stop and learning-rate decisions each epoch and the best weights at the
end, so every rank finishes on the same epoch with the same model. A single-process fit past its deadline stops
after the batch in hand, not at the epoch's end. On CUDA out-of-memory a single-process fit halves its batch and
starts again instead of failing.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DistributedSampler, TensorDataset

from tabjob.families import ModelFamily
from tabjob_trainer.metrics import score
from tabjob_trainer.models.base import FitContext, Trained
from tabjob_trainer.models.mlp_inputs import apply_numeric, fit_numeric
from tabjob_trainer.models.permutation import permutation_importance
from tabjob_trainer.preprocess import Encoded

_MIN_BATCH = 8
_MAX_AUTO_BATCH = 512


def auto_batch(rows: int) -> int:
    return int(max(_MIN_BATCH, min(2 ** (3 + int(math.log10(max(rows, 1)))), _MAX_AUTO_BATCH)))


def patience_left(best_epoch: int, patience: int, adaptive: float) -> int:
    """Epochs to wait past the best one: a model that improved late is given longer to improve again."""
    return int(patience + adaptive * best_epoch)


def scaled_lr(lr: float, world: int, rule: str) -> float:
    if rule == "linear":
        return lr * world
    if rule == "sqrt":
        return lr * math.sqrt(world)
    if rule == "none":
        return lr
    raise ValueError(f"lr_scaling must be linear, sqrt or none, not {rule!r}")


def local_quantiles(numeric: torch.Tensor, refs: torch.Tensor) -> list[torch.Tensor]:
    """Each column's quantiles at ``refs`` over this process's rows."""
    if len(numeric) == 0:
        return [torch.empty(0, dtype=torch.float64) for _ in range(numeric.shape[1])]
    return [torch.quantile(numeric[:, j].to(torch.float64), refs) for j in range(numeric.shape[1])]


Quantiles = Callable[[torch.Tensor, torch.Tensor], list[torch.Tensor]]


@dataclass(frozen=True)
class Network:
    """What differs between the families this loop trains (NN_TORCH's MLP, TabM): the family (whose defaults a
    config starts from), what a saved model keeps of the hyperparameters (given the preprocessed training columns),
    the module built from that saved config, at fit time and at load time alike, and ``batch_size: auto``'s batch."""

    facts: ModelFamily
    # (hyperparameters, preprocessed training columns, their quantile function) -> what the saved model keeps
    settings: Callable[[dict[str, Any], torch.Tensor, Quantiles], dict[str, Any]]
    build: Callable[[dict[str, Any]], nn.Module]
    # hyperparameters -> how many members take their own shuffle of the rows each epoch (0: all share each batch)
    own_batches: Callable[[dict[str, Any]], int] = lambda hp: 0
    batch_for_rows: Callable[[int], int] = auto_batch


class NetworkModel:
    def __init__(self, net: nn.Module, config: dict[str, Any], problem: str) -> None:
        self.net = net
        self.config = config  # the inputs' preprocessing, the target's scale, the network's saved settings
        self.problem = problem

    def _inputs(self, x: Encoded) -> tuple[torch.Tensor, torch.Tensor]:
        return inputs(self.config, x)

    def predict(self, x: Encoded, batch: int = 8192) -> np.ndarray:
        return self.predict_inputs(*self._inputs(x), batch=batch)

    def predict_inputs(self, num: torch.Tensor, cat: torch.Tensor, batch: int = 8192) -> np.ndarray:
        """Predictions from already preprocessed inputs (the validation rows are preprocessed once per fit)."""
        return _to_prediction(self.logits(num, cat, batch), self.problem, self.config)

    def logits(self, num: torch.Tensor, cat: torch.Tensor, batch: int) -> torch.Tensor:
        """The network's outputs on the CPU, ``batch`` rows at a time: a whole validation fold at once can need
        more GPU memory than the training batches that fit."""
        self.net.eval()
        device = next(self.net.parameters()).device
        outs = []
        with torch.no_grad():
            # No rows: one empty batch, so that the output keeps the network's own shape (TabM's members axis).
            for i in range(0, len(num), batch) or [0]:
                outs.append(self.net(num[i : i + batch].to(device), cat[i : i + batch].to(device)).float().cpu())
        return torch.cat(outs)

    def save(self, directory: Path) -> None:
        buf = io.BytesIO()
        torch.save({"state": self.net.state_dict(), "config": self.config}, buf)
        (directory / "model.pt").write_bytes(buf.getvalue())

    @classmethod
    def load(cls, directory: Path, problem: str, network: Network) -> NetworkModel:
        # Tensors and plain data only: a crafted run directory must not run code when it is loaded.
        blob = torch.load(directory / "model.pt", map_location="cpu", weights_only=True)
        cfg = blob["config"]
        net = network.build(cfg)
        net.load_state_dict(blob["state"])
        return cls(net, cfg, problem)


def inputs(cfg: dict[str, Any], x: Encoded) -> tuple[torch.Tensor, torch.Tensor]:
    """The network's inputs: preprocessed numeric columns, and category codes shifted so that 0 is missing."""
    num = apply_numeric(cfg["numeric"], x.numeric)
    return torch.from_numpy(num), torch.from_numpy(x.categorical + 1)


def _to_prediction(logits: torch.Tensor, problem: str, cfg: dict[str, Any]) -> np.ndarray:
    """Probabilities or values from the network's outputs: (rows, outputs), or (rows, members, outputs) for an
    ensemble in one network (TabM), whose prediction is the mean of its members' probabilities or values."""
    members = logits.ndim == 3

    def mean(values: torch.Tensor) -> torch.Tensor:
        return values.mean(dim=1) if members else values

    if problem == "binary":
        return mean(torch.sigmoid(logits[..., 0])).numpy().astype(np.float64)
    if problem == "multiclass":
        return mean(torch.softmax(logits, dim=-1)).numpy().astype(np.float64)
    pred = mean(logits[..., 0]).numpy() * cfg["y_std"] + cfg["y_mean"]
    # A network extrapolates linearly; a target seldom does. Stay within the training range, widened by 5%.
    return np.clip(pred, cfg["y_low"], cfg["y_high"]).astype(np.float64)


def _member_loss(loss_fn: nn.Module, out: torch.Tensor, target: torch.Tensor, own: bool = False) -> torch.Tensor:
    """The loss of every member on its rows, averaged (TabM trains its k members as k models that share weights,
    not their mean as one model): the same rows for all, or (``own``) a target per member, (rows, k, ...); a plain
    network's (rows, outputs) is scored as it is."""
    if own:
        return loss_fn(out.flatten(0, 1), target.flatten(0, 1))
    if out.ndim == 3:
        members = out.shape[1]
        return loss_fn(out.flatten(0, 1), target.repeat_interleave(members, dim=0))
    return loss_fn(out, target)


def _loss(problem: str, regression_loss: str) -> nn.Module:
    if problem == "binary":
        return nn.BCEWithLogitsLoss()
    if problem == "multiclass":
        return nn.CrossEntropyLoss()
    losses = {"huber": nn.HuberLoss, "mse": nn.MSELoss, "l1": nn.L1Loss}
    if regression_loss not in losses:
        raise ValueError(f"regression_loss must be huber, mse or l1, not {regression_loss!r}")
    return losses[regression_loss]()


def _targets(y: np.ndarray, problem: str, cfg: dict[str, Any]) -> torch.Tensor:
    if problem == "binary":
        return torch.from_numpy(y.astype(np.float32)).unsqueeze(1)
    if problem == "multiclass":
        return torch.from_numpy(y.astype(np.int64))
    return torch.from_numpy(((y - cfg["y_mean"]) / cfg["y_std"]).astype(np.float32)).unsqueeze(1)


def fit_network(
    ctx: FitContext,
    train: Encoded,
    y_train: np.ndarray,
    val: Encoded,
    y_val: np.ndarray,
    network: Network,
) -> Trained | None:
    """One fit of ``network``: its defaults under the config's hyperparameters, trained by this loop."""
    hp = network.facts.effective(ctx.hyperparameters)
    rows = len(y_train)
    if ctx.sharded and ctx.distributed:
        from tabjob_trainer.sharded.network import total_rows

        rows = total_rows(ctx, rows)  # the batch follows the whole training set, as in one process
    batch = network.batch_for_rows(rows) if hp["batch_size"] == "auto" else int(hp["batch_size"])
    while True:
        try:
            return _fit(ctx, hp, network, batch, train, y_train, val, y_val)
        except torch.cuda.OutOfMemoryError:
            # Ranks of a DDP fit would have to agree on the new batch size; only single-process fits retry.
            if ctx.distributed or batch // 2 < _MIN_BATCH:
                raise
            batch //= 2
            torch.cuda.empty_cache()


def _fit(
    ctx: FitContext,
    hp: dict[str, Any],
    network: Network,
    batch: int,
    train: Encoded,
    y_train: np.ndarray,
    val: Encoded,
    y_val: np.ndarray,
) -> Trained | None:
    torch.manual_seed(ctx.seed)
    device = torch.device(ctx.device)
    n_out = ctx.n_classes if ctx.problem == "multiclass" else 1
    regression = ctx.problem == "regression"
    shards = ctx.sharded and ctx.distributed
    if shards:  # each rank holds only its rows: the statistics come from every rank's summaries
        from tabjob_trainer.sharded import network as over

        y_mean, y_std, y_low, y_high = over.target(ctx, y_train) if regression else (0.0, 1.0, 0.0, 0.0)
        numeric_stats = over.fit_numeric(ctx, train.numeric, float(hp["skew_threshold"]))
    else:
        y_low, y_high = (float(np.min(y_train)), float(np.max(y_train))) if regression else (0.0, 0.0)
        y_mean = float(np.mean(y_train)) if regression else 0.0
        y_std = float(np.std(y_train) or 1.0) if regression else 1.0
        numeric_stats = fit_numeric(train.numeric, float(hp["skew_threshold"]))
    margin = 0.05 * (y_high - y_low)
    cfg: dict[str, Any] = {
        "numeric": numeric_stats,
        "cardinalities": ctx.cardinalities,
        "n_out": n_out,
        "y_mean": y_mean,
        "y_std": y_std,
        "y_low": y_low - margin,
        "y_high": y_high + margin,
        "batch_size": batch,
    }
    num, cat = inputs(cfg, train)
    cfg.update(network.settings(hp, num, over.quantiles(ctx) if shards else local_quantiles))
    net = network.build(cfg).to(device)
    model = NetworkModel(net, cfg, ctx.problem)
    world = len(ctx.ranks)
    wrapped: nn.Module = net
    if ctx.distributed:
        from torch.nn.parallel import DistributedDataParallel

        wrapped = DistributedDataParallel(
            net, device_ids=[device.index] if device.type == "cuda" else None, process_group=ctx.group
        )
    data = TensorDataset(num, cat, _targets(y_train, ctx.problem, cfg))
    sampler: DistributedSampler[Any] | None = (
        DistributedSampler(data, num_replicas=world, rank=ctx.ranks.index(ctx.rank), shuffle=True, seed=ctx.seed)
        if ctx.distributed and not shards
        else None
    )
    generator = torch.Generator().manual_seed(ctx.seed + (1000003 * ctx.ranks.index(ctx.rank) if shards else 0))
    per_epoch = over.steps(ctx, len(y_train), batch) if shards else 0
    lr = scaled_lr(float(hp["learning_rate"]), world, str(hp["lr_scaling"]))
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=float(hp["weight_decay"]))
    loss_fn = _loss(ctx.problem, str(hp["regression_loss"]))
    val_num, val_cat = model._inputs(val)
    val_target = _targets(y_val, ctx.problem, cfg)
    amp_dtype = _amp_dtype(device) if bool(hp["amp"]) else None
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)
    # One process holding every row can give each member its own shuffle; ranks splitting the rows share batches.
    clip, members = float(hp["gradient_clip"]), 0 if ctx.distributed else network.own_batches(hp)

    best: tuple[float, float] = (-math.inf, -math.inf)  # (validation score, minus validation loss)
    best_state, best_epoch, bad_epochs = None, 0, 0
    curve: dict[str, Any] = {"metric": ctx.metric, "train_loss": [], "val": []}
    epochs = int(hp["num_epochs"])
    for epoch in range(epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        wrapped.train()
        total, seen = 0.0, 0
        order = over.batches(len(y_train), per_epoch, batch, generator) if shards else None
        epoch_batches = _member_batches(data, members, batch, generator) if members else None
        for xb_num, xb_cat, yb in epoch_batches or _batches(data, sampler, batch, generator, order):
            if seen and not ctx.distributed and ctx.past_deadline():
                break  # mid-epoch: one epoch of a wide network can outlast the time kept for the refit and its guard
            xb_num, xb_cat, yb = xb_num.to(device), xb_cat.to(device), yb.to(device)
            opt.zero_grad(set_to_none=True)
            amp = amp_dtype is not None
            with torch.autocast(device_type=device.type, dtype=amp_dtype or torch.float32, enabled=amp):
                loss = _member_loss(loss_fn, wrapped(xb_num, xb_cat), yb, own=bool(members))
            scaler.scale(loss).backward()
            if clip > 0:
                scaler.unscale_(opt)  # clip the true gradients, not the scaled ones
                nn.utils.clip_grad_norm_(net.parameters(), clip)
            scaler.step(opt)
            scaler.update()
            total += float(loss.detach()) * len(yb)
            seen += len(yb)
        stop = False
        scored = (
            _evaluate(model, val_num, val_cat, val_target, y_val, loss_fn, ctx, batch) if ctx.leader or shards else None
        )
        halve = False
        if ctx.leader and scored is not None:
            val_score, val_loss = scored
            curve["train_loss"].append(total / max(seen, 1))
            curve["val"].append(val_score)
            # A tie on the metric (accuracy on a small fold often ties) goes to the lower validation loss.
            if (val_score, -val_loss) > best:
                best, best_epoch, bad_epochs = (val_score, -val_loss), epoch, 0
                best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
            else:
                bad_epochs += 1
                halve = not ctx.refit and int(hp["lr_plateau"]) > 0 and bad_epochs % int(hp["lr_plateau"]) == 0
            wait = patience_left(best_epoch, int(hp["patience"]), float(hp["adaptive_patience"]))
            stop = (bad_epochs >= wait and not ctx.refit) or ctx.past_deadline()
        if ctx.distributed:  # every rank halves its learning rate and stops with the leader
            stop, halve = _broadcast((stop, halve), ctx)
        if halve:
            for group in opt.param_groups:
                group["lr"] *= 0.5
        if stop:
            break
    if ctx.leader and best_state is not None and not ctx.refit:  # a refit keeps its last epoch's weights
        net.load_state_dict(best_state)
    if ctx.distributed:
        # Every rank ends with the leader's best weights and epoch (they may later predict or be saved by any rank).
        for tensor in net.state_dict().values():
            dist.broadcast(tensor, src=ctx.ranks[0], group=ctx.group)
        box: list[Any] = [best_epoch]
        dist.broadcast_object_list(box, src=ctx.ranks[0], group=ctx.group)
        best_epoch = int(box[0])
    if not ctx.returns_model:
        return None
    net.cpu()
    return Trained(
        model=model,
        device=str(device),
        curve=curve,
        importance=permutation_importance(model, val, y_val, ctx),
        best_iteration=len(curve["val"]) if ctx.refit else best_epoch + 1,
        extra={"batch_size": batch, "learning_rate": lr, "world": world, "amp": _dtype_name(amp_dtype)},
    )


def _evaluate(
    model: NetworkModel,
    num: torch.Tensor,
    cat: torch.Tensor,
    target: torch.Tensor,
    y: np.ndarray,
    loss_fn: nn.Module,
    ctx: FitContext,
    batch: int,
) -> tuple[float, float] | None:
    """(metric, loss) on the validation rows, ``batch`` rows at a time (the training batch: one that ran out of
    memory was halved, and so is this); the loss is the training loss, on the same scale. Over shards each rank
    predicts its own rows and the leader scores them all (None on the other ranks)."""
    logits = model.logits(num, cat, batch)
    if ctx.sharded and ctx.distributed:
        from tabjob_trainer.sharded.network import gathered_validation

        received = gathered_validation(ctx, logits, y)
        if received is None:
            return None
        logits, y = received
        target = _targets(y, ctx.problem, model.config)
    with torch.no_grad():
        loss = float(_member_loss(loss_fn, logits, target))
    pred = _to_prediction(logits, ctx.problem, model.config)
    return score(ctx.metric, ctx.problem, y, pred, ctx.n_classes), loss


def _batches(
    data: TensorDataset,
    sampler: DistributedSampler[Any] | None,
    batch: int,
    generator: torch.Generator,
    order: Iterator[torch.Tensor] | None = None,
) -> Iterator[tuple[torch.Tensor, ...]]:
    """Shuffled batches sliced from the whole tensors at once.

    A DataLoader over a TensorDataset fetches and collates row by row in Python, which on tabular data costs
    more than the forward and backward passes; one index per batch keeps the epoch in C++. The
    DistributedSampler still decides which rows each rank sees, so DDP semantics are unchanged.
    """
    if order is not None:  # over shards: the batches every rank takes alike (sharded/network.py)
        for idx in order:
            yield tuple(t[idx] for t in data.tensors)
        return
    n = len(data.tensors[0])
    shuffled = torch.tensor(list(sampler)) if sampler is not None else torch.randperm(n, generator=generator)
    for start in range(0, len(shuffled), batch):
        idx = shuffled[start : start + batch]
        yield tuple(t[idx] for t in data.tensors)


def _member_batches(
    data: TensorDataset, members: int, batch: int, generator: torch.Generator
) -> Iterator[tuple[torch.Tensor, ...]]:
    """Batches of (rows, members, ...): every member walks its own shuffle of the rows, ``batch`` rows a step."""
    n = len(data.tensors[0])
    orders = torch.rand((members, n), generator=generator).argsort(dim=1)
    for start in range(0, n, batch):
        idx = orders[:, start : start + batch].T  # (rows, members)
        yield tuple(t[idx] for t in data.tensors)


def _amp_dtype(device: torch.device) -> torch.dtype | None:
    if device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def _dtype_name(dtype: torch.dtype | None) -> str:
    return "off" if dtype is None else str(dtype).removeprefix("torch.")


def _broadcast(flags: tuple[bool, bool], ctx: FitContext) -> tuple[bool, bool]:
    box: list[Any] = [flags]
    dist.broadcast_object_list(box, src=ctx.ranks[0], group=ctx.group)
    return bool(box[0][0]), bool(box[0][1])
