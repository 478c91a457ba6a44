"""Pods from the peak: whole GPUs over as few pods as gpusPerPod allows, one rank per GPU; a CPU-only job
gets one rank per concurrent fit process, its ranks spread over pods of at most cpusPerPod CPUs."""

from __future__ import annotations

import math

from tabjob.api import BudgetSpec, parse_quantity
from tabjob.api.errors import SpecError
from tabjob.contracts.plan import PodPlan


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` integers differing by at most one, larger first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _memory_per_pod(memory: str | None, procs: list[int], world: int) -> list[str | None]:
    if memory is None:
        return [None] * len(procs)
    per_rank_mib = parse_quantity(memory) / world / 2**20
    return [_mebibytes(max(1, math.floor(per_rank_mib * n))) for n in procs]


def _mebibytes(mib: int) -> str:
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def gpu_pods(job: str, gpus: int, cpus: int, resources: BudgetSpec) -> list[PodPlan]:
    n_pods = math.ceil(gpus / resources.gpus_per_pod)
    procs = split_evenly(gpus, n_pods)
    rank_cpus = split_evenly(max(cpus, gpus), gpus)
    return _pods(job, procs, rank_cpus, procs, resources.memory)


def cpu_pods(job: str, world: int, cpus: int, resources: BudgetSpec) -> list[PodPlan]:
    rank_cpus = split_evenly(max(cpus, world), world)
    limit = resources.cpus_per_pod
    if limit is None:
        procs = [world]
    else:
        if rank_cpus[0] > limit:
            raise SpecError.at(
                "spec.resources.cpusPerPod",
                f"each of the {world} ranks needs {rank_cpus[0]} CPUs but a pod may hold only {limit}; "
                f"raise cpusPerPod to at least {rank_cpus[0]}",
            )
        procs = []
        used = 0
        for c in rank_cpus:
            if procs and used + c <= limit:
                procs[-1] += 1
                used += c
            else:
                procs.append(1)
                used = c
    return _pods(job, procs, rank_cpus, [0] * len(procs), resources.memory)


def _pods(job: str, procs: list[int], rank_cpus: list[int], gpus: list[int], memory: str | None) -> list[PodPlan]:
    world = sum(procs)
    mems = _memory_per_pod(memory, procs, world)
    pods, first = [], 0
    for i, n in enumerate(procs):
        pods.append(
            PodPlan(
                name=f"{job}-{i}",
                cpus=sum(rank_cpus[first : first + n]),
                gpus=gpus[i],
                memory=mems[i],
                procs=n,
                first_rank=first,
            )
        )
        first += n
    return pods
