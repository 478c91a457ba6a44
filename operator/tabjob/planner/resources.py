"""Per-fit resources in AutoGluon's hierarchy: budget T > bagged model E > fit r, with the checks.

T is ``spec.resources``; E is ``spec.bagging.resources`` (default T per dimension); a config's r takes
each dimension it leaves out from E split evenly over the folds when bagging, else from T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tabjob.api import ModelConfig, TabularJobSpec
from tabjob.api.errors import SpecError
from tabjob.families import family

EPS = 1e-9


@dataclass(frozen=True)
class Res:
    cpus: int
    gpus: float


def budget(spec: TabularJobSpec) -> Res:
    return Res(spec.resources.cpus, spec.resources.gpus)


def bagged_model(spec: TabularJobSpec) -> Res:
    """E, checked against T."""
    t = budget(spec)
    given = spec.bagging.resources
    e = Res(
        given.cpus if given and given.cpus is not None else t.cpus,
        given.gpus if given and given.gpus is not None else t.gpus,
    )
    problems = []
    if e.cpus > t.cpus:
        problems.append(("spec.bagging.resources.cpus", f"{e.cpus} is above the budget spec.resources.cpus={t.cpus}"))
    if e.gpus > t.gpus + EPS:
        problems.append(
            (
                "spec.bagging.resources.gpus",
                f"{e.gpus:g} is above the budget spec.resources.gpus={t.gpus:g}"
                + ("; set spec.resources.gpus to use GPUs" if t.gpus == 0 else ""),
            )
        )
    if problems:
        raise SpecError(problems)
    return e


def round_down_gpus(x: float) -> float:
    """The largest valid GPU amount <= x: whole GPUs, or 1/k of one."""
    if x >= 1 - EPS:
        return float(math.floor(x + EPS))
    if x <= EPS:
        return 0.0
    return 1.0 / math.ceil(1.0 / x - EPS)


def fit_resources(spec: TabularJobSpec, key: str, index: int, config: ModelConfig) -> Res:
    """r for one config, with every check that rejects it naming the field."""
    path = f"spec.models.{key}[{index}]"
    t, e = budget(spec), bagged_model(spec)
    folds = spec.bagging.folds
    bagged = folds >= 2
    given = config.resources
    procs = config.processes
    # A family whose GPU fit is one device (multi_gpu_fit False) also trains data-parallel on the CPU only.
    kind = family(key)
    single_device = not kind.multi_gpu_fit

    cpus = given.cpus if given and given.cpus is not None else max(1, e.cpus // folds) if bagged else t.cpus
    if given and given.gpus is not None:
        gpus = given.gpus
    else:
        inherited = round_down_gpus(e.gpus / folds) if bagged else t.gpus
        # One process drives at most one GPU; an inherited budget is capped there rather than rejected.
        cap = 1.0 if procs == 1 or single_device else float(procs)
        gpus = min(inherited, cap)

    limit_name = "the bagged model's spec.bagging.resources" if bagged else "the budget spec.resources"
    limit = e if bagged else t
    problems: list[tuple[str, str]] = []
    if cpus > limit.cpus:
        problems.append((f"{path}.resources.cpus", f"{cpus} is above {limit_name}.cpus={limit.cpus}"))
    if gpus > 0 and t.gpus == 0:
        problems.append(
            (
                f"{path}.resources.gpus",
                f"asks for {gpus:g} GPU but spec.resources.gpus is 0; give the job GPUs or use 0",
            )
        )
    elif gpus > limit.gpus + EPS:
        problems.append((f"{path}.resources.gpus", f"{gpus:g} is above {limit_name}.gpus={limit.gpus:g}"))
    if single_device and gpus > 1 + EPS:
        problems.append(
            (f"{path}.resources.gpus", f"{key} ({kind.library}) trains on one device: use 0, a fraction or 1")
        )
    if procs > 1:
        if not kind.data_parallel:
            problems.append((f"{path}.processes", f"{key} cannot train data-parallel; use processes: 1"))
        if single_device and gpus > 0:
            problems.append(
                (
                    f"{path}.processes",
                    f"{kind.library} data-parallel training is CPU-only; use gpus: 0 or processes: 1",
                )
            )
        elif gpus > 0 and abs(gpus - procs) > EPS:
            problems.append(
                (
                    f"{path}.resources.gpus",
                    f"a data-parallel fit uses one whole GPU per process: with processes: {procs} use gpus: "
                    f"{procs} (or 0 for CPU)",
                )
            )
        if cpus < procs:
            problems.append((f"{path}.resources.cpus", f"{cpus} CPUs cannot feed {procs} processes; use >= {procs}"))
    elif gpus > 1 + EPS and not single_device:
        problems.append(
            (
                f"{path}.resources.gpus",
                f"one process drives one GPU: for {gpus:g} GPUs set processes: {gpus:g}",
            )
        )
    if problems:
        raise SpecError(problems)
    return Res(cpus, gpus)
