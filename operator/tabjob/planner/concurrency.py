"""How many folds and trials of one config run at once (README.md, "The resource hierarchy, made exact").

p_f = min(folds, floor(E.cpus / r.cpus), floor(E.gpus / r.gpus) if r.gpus > 0); one trial uses U = r * p_f;
p_t = min(trials, floor(T.cpus / U.cpus), floor(T.gpus / U.gpus) if U.gpus > 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tabjob.planner.resources import EPS, Res


@dataclass(frozen=True)
class Parallelism:
    folds: int
    trials: int

    @property
    def fits(self) -> int:
        return self.folds * self.trials


def _fits_in(capacity: Res, each: Res) -> int:
    n = capacity.cpus // each.cpus
    if each.gpus > 0:
        n = min(n, math.floor(capacity.gpus / each.gpus + EPS))
    return n


def parallelism(t: Res, e: Res, r: Res, folds: int, trials: int) -> Parallelism:
    p_f = max(1, min(max(folds, 1), _fits_in(e if folds >= 2 else t, r)))
    u = Res(r.cpus * p_f, r.gpus * p_f)
    p_t = max(1, min(trials, _fits_in(t, u)))
    return Parallelism(folds=p_f, trials=p_t)


def peak_of(r: Res, p: Parallelism) -> Res:
    return Res(r.cpus * p.fits, r.gpus * p.fits)
