"""Where each fit runs: concurrent slots mapped onto ranks and devices.

Fractional fits are packed onto whole GPUs (k fits of 1/k share one rank's GPU); a whole-GPU fit takes one
rank per process; CPU fits take one rank per process in a CPU-only job and are dealt round-robin over the
ranks of a GPU job. A slot runs its fits one after another.
"""

from __future__ import annotations

from dataclasses import dataclass

from tabjob.contracts.plan import PodPlan
from tabjob.planner.resources import EPS, Res


@dataclass(frozen=True)
class Place:
    ranks: list[int]
    gpu: bool


def slot_places(slots: int, r: Res, processes: int, world: int) -> list[Place]:
    places = []
    per_process = r.gpus / processes
    for s in range(slots):
        if r.gpus <= EPS:
            ranks = [(s * processes + j) % world for j in range(processes)]
            places.append(Place(ranks, gpu=False))
        elif per_process < 1 - EPS:
            share = round(1 / per_process)
            places.append(Place([s // share], gpu=True))
        else:
            places.append(Place([s * processes + j for j in range(processes)], gpu=True))
    return places


def device_of(rank: int, gpu: bool, pods: list[PodPlan]) -> str:
    if not gpu:
        return "cpu"
    for pod in pods:
        if pod.first_rank <= rank < pod.first_rank + pod.procs:
            return f"cuda:{rank - pod.first_rank}"
    raise AssertionError(f"rank {rank} is outside every pod")
