"""Runs this rank's share of the plan.

Rounds of configs (tabjob.planner.rounds: one config, or consecutive configs of one shape whose folds are dealt over
the slots as one) run one after another in plan order. Within a round, the plan's slots run concurrently and the
fits of one slot run one after another; a rank holding several slots (fractional GPUs, or several CPU slots) runs
them on threads, which is cheap because LightGBM and torch release the GIL while they compute. After each round
every rank sends its new outcomes to rank 0 over the process group, so pods need no shared volume.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Any

from tabjob.contracts.plan import FitPlan, Plan
from tabjob.planner.rounds import rounds
from tabjob.planner.time_share import round_share
from tabjob_trainer import store
from tabjob_trainer.dataset import Prepared
from tabjob_trainer.deadlines import fold_deadline, folds_left, fraction_deadline, share_deadline
from tabjob_trainer.errors import GPUUnavailableError
from tabjob_trainer.fingerprint import changed, fit_fingerprint
from tabjob_trainer.fitting import run_fit, skipped
from tabjob_trainer.models.base import FitContext
from tabjob_trainer.models.registry import family
from tabjob_trainer.progress import Progress


@dataclass
class RankEnv:
    rank: int
    world: int
    out: Path
    deadline: float | None
    gpu_count: int  # CUDA devices torch sees in this process
    data_id: str  # fingerprint.data_identity of the prepared data


def slots_of(plan: Plan, rank: int, orders: list[int]) -> dict[int, list[FitPlan]]:
    """This rank's fits of one round's configs, by slot, in plan order (pure)."""
    slots: dict[int, list[FitPlan]] = defaultdict(list)
    for fit in plan.fits:
        if fit.order in orders and rank in fit.ranks:
            slots[fit.slot].append(fit)
    return dict(sorted(slots.items()))


def threads_for(slots: dict[int, list[FitPlan]]) -> int:
    """torch's intra-op pool is per process: size it for the slots running at once on this rank."""
    return max(1, sum(fits[0].cpus // fits[0].processes for fits in slots.values()))


def fit_device(fit: FitPlan, plan: Plan, rank: int) -> str:
    if fit.device == "cpu" or fit.gpus == 0:
        return "cpu"
    if rank == fit.rank:
        return fit.device
    return f"cuda:{rank - plan.pod_of_rank(rank).first_rank}"


def make_groups(plan: Plan) -> dict[str, Any]:
    """A process group for each data-parallel fit, shared by fits over the same ranks.

    Sharing is safe because concurrent slots never share a rank, and fits of one slot run one after another.
    Every rank must create every group, in the same order, members or not.
    """
    groups: dict[str, Any] = {}
    if not any(f.processes > 1 for f in plan.fits):
        return groups  # and torch stays unimported in a GBM-only job
    import torch.distributed as dist

    if not dist.is_initialized():
        return groups
    made: dict[tuple[tuple[int, ...], str], Any] = {}
    for fit in plan.fits:
        if fit.processes > 1:
            backend = family(fit.key).group_backend(fit.gpus)
            key = (tuple(fit.ranks), backend)
            if key not in made:
                made[key] = dist.new_group(ranks=fit.ranks, backend=backend)
            groups[fit.id] = made[key]
    return groups


def trains_networks(plan: Plan, rank: int) -> bool:
    """Whether this rank trains a torch family's fit (warmup.py readies torch for it while the trees train)."""
    return any(family(fit.key).needs_torch and rank in fit.ranks for fit in plan.fits)


class RankRunner:
    def __init__(
        self,
        env: RankEnv,
        plan: Plan,
        data: Prepared,
        progress: Progress,
        done: dict[str, dict[str, str] | None],
        torch_ready: Callable[[], None],
    ) -> None:
        """``done``: the fingerprint of every finished fit already in the store, by fit id. ``torch_ready``:
        returns once torch's one-time start-up is paid (warmup.py), called before the first round with a network."""
        self.env, self.plan, self.data, self.progress, self.done = env, plan, data, progress, done
        self.torch_ready = torch_ready
        self.groups = make_groups(plan)
        self.fallback = plan.on_gpu_unavailable == "FallbackToCPU"

    def run(self, gather: Callable[[list[store.Outcome], int], float | None]) -> None:
        """``gather``: sends a round's outcomes to rank 0 with its last config's order and may answer with the base
        models' new deadline, the same on every rank (post_base.py: the time kept after them, sized from the fits
        so far)."""
        for orders in rounds(self.plan.configs):
            slots = slots_of(self.plan, self.env.rank, orders)
            networks = any(family(fits[0].key).needs_torch for fits in slots.values())
            if networks:
                self.torch_ready()  # before the round's clock: a wait here is the whole run's, not one config's
            new: list[store.Outcome] = []
            # A config gets its share of the time left: even until every family has had a turn, then a turn's worth;
            # a round, its configs' shares together.
            config_deadline = fraction_deadline(time.time(), self.env.deadline, round_share(self.plan, orders))
            if slots:
                if networks:
                    import torch

                    torch.set_num_threads(threads_for(slots))
                with ThreadPoolExecutor(max_workers=len(slots), thread_name_prefix="slot") as pool:
                    for outcomes in pool.map(self._run_slot, slots.values(), repeat(config_deadline)):
                        new.extend(outcomes)
            moved = gather(new, orders[-1])
            if moved is not None:
                self.env.deadline = moved

    def _run_slot(self, fits: list[FitPlan], shared: float | None) -> list[store.Outcome]:
        """``shared``: the round's time, which the slot's fits split evenly (None: no time limit)."""
        out = []
        fingerprints = {fit.id: fit_fingerprint(fit, self.plan.folds, self.env.data_id) for fit in fits}
        changes = {fit.id: changed(self.done[fit.id], fingerprints[fit.id]) for fit in fits if fit.id in self.done}
        parts = folds_left([fit.id for fit in fits], {fit_id for fit_id, diff in changes.items() if not diff})
        # Each fold's even share as the slot starts: the least any of them gets (deadlines.py says why).
        started, training = time.time(), max(parts.values(), default=0)
        even = share_deadline(started, shared, training) if training else None
        floor = even - started if even is not None else None
        for fit in fits:
            fingerprint = fingerprints[fit.id]
            refit = ""
            if fit.id in changes:
                diff = changes[fit.id]
                if not diff:
                    if self.env.rank == fit.rank:
                        self.progress.fit_resumed(fit.id, fit.model)
                    continue
                refit = f"refit: {', '.join(diff)} changed since the stored fit"
            outcome = self._one(fit, fold_deadline(time.time(), shared, parts[fit.id], floor, self.env.deadline))
            if outcome is not None:
                outcome.record.fingerprint = fingerprint
                if refit:
                    outcome.record.note = "; ".join(n for n in (refit, outcome.record.note) if n)
                store.write(self.env.out, outcome)
                out.append(outcome)
                self.progress.fit_ended(outcome.record)
        return out

    def _one(self, fit: FitPlan, deadline: float | None) -> store.Outcome | None:
        """``deadline``: this fit's share of the time (None: no time limit)."""
        leader = self.env.rank == fit.rank
        reason = self._skip_reason()
        if fit.processes > 1:
            reason = self._agree(fit, reason)
        if reason:
            return skipped(fit, reason) if leader else None
        if leader:
            self.progress.fit_started(fit.id, fit.model)
        device = fit_device(fit, self.plan, self.env.rank)
        note = None
        # Families on torch train on CUDA through it; the others probe their own GPU backends when they fit.
        if device != "cpu" and family(fit.key).needs_torch and self.env.gpu_count == 0:
            message = f"{fit.id} asked for {fit.gpus:g} GPU but torch sees no CUDA device on rank {self.env.rank}"
            if not self.fallback:
                from tabjob_trainer.fitting import failed

                err = GPUUnavailableError(message + "; set onGpuUnavailable: FallbackToCPU to train on the CPU")
                return failed(fit, err, device) if leader else None
            device, note = "cpu", f"FallbackToCPU: {message}"
        ctx = FitContext(
            fit_id=fit.id,
            hyperparameters=fit.hyperparameters,
            seed=fit.seed,
            threads=max(1, fit.cpus // fit.processes),
            device=device,
            problem=self.data.label.problem_type,
            n_classes=self.data.n_classes,
            metric=self.data.metric,
            feature_names=self.data.pre.feature_names,
            cardinalities=self.data.pre.cardinalities,
            fallback_to_cpu=self.fallback,
            ranks=fit.ranks,
            rank=self.env.rank,
            group=self.groups.get(fit.id),
            deadline=deadline,
            sharded=self.data.shard is not None,
        )
        outcome = run_fit(fit, self.data, self.plan.folds, ctx)
        if outcome is not None and outcome.record.succeeded:
            stopped = self._stopped_by(deadline)
            outcome.record.note = "; ".join(n for n in (note or outcome.record.note, stopped) if n) or None
            outcome.record.fallback = outcome.record.fallback or note is not None
        return outcome

    def _stopped_by(self, deadline: float | None) -> str:
        """Why a fit that ended at or past its deadline ended then, for its leaderboard row: a user seeing a short
        bag should know the time stopped it, not its early stopping. A fit over several ranks: the leader's clock
        (its ranks stop together once any of them has passed the deadline)."""
        if deadline is None or time.time() < deadline:
            return ""
        if self.env.deadline is not None and deadline < self.env.deadline:
            return "stopped by its share of the time limit"
        return "stopped by the time limit"

    def _skip_reason(self) -> str:
        if self.env.deadline is not None and time.time() >= self.env.deadline:
            limit = f"time limit of {self.plan.time_limit_seconds} s"
            if self.plan.stacking or self.plan.refit:
                limit = f"base models' share of the {limit} (the rest is kept for the stack layer and the refit)"
            return f"{limit} reached before the fit could start"
        return ""

    def _agree(self, fit: FitPlan, reason: str) -> str:
        """Ranks of one data-parallel fit must all skip or all train: the leader decides."""
        import torch.distributed as dist

        box = [reason]
        dist.broadcast_object_list(box, src=fit.rank, group=self.groups[fit.id])
        return str(box[0])
