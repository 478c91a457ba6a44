"""Rounds: consecutive configs that the ranks run without waiting for each other between them (pure).

A config's folds are dealt over its slots, and every rank waits for the others when a config ends (its outcomes go
to rank 0, which may move the base models' deadline). With 3 folds on 2 slots, one slot holds two folds and the
other one: the rank holding one idled through much of every config (busy a median 67% of the base models' time on
two CPUs, BENCHMARKS.md "How busy each rank was"), and under a time limit its lone fold had twice the time of the
other two, so a bag's folds differed in quality.

So configs of the same shape (CPUs, GPUs and slots per fit, one process, one trial at a time) join into a round
until every slot holds as many fits as the others, and the deal continues across them: the second config of a
3-fold pair starts on the slot the first one left off on, so each slot holds three fits (A0 A2 B1 and A1 B0 B2),
runs them one after another, and the ranks wait for each other once per round. The round ends early where the
shape changes, and always with the last family's first config: that config has all the time left (time_share.py),
and the one-turn-each shares start after it.
"""

from __future__ import annotations

from tabjob.contracts.plan import ConfigPlan

_Shape = tuple[int, float, int]


def _shape(config: ConfigPlan) -> _Shape | None:
    """What configs must share to join a round; None where a config always runs alone: its fits span several
    ranks (their process group holds them together), or it runs trials side by side (their slots are the trials')."""
    if config.processes != 1 or config.trials_parallel != 1 or config.folds_parallel < 2:
        return None
    return (config.cpus, config.gpus, config.folds_parallel)


def last_first_config(configs: list[ConfigPlan]) -> int | None:
    """The order of the last family's first config, from the configs (time_share.last_first_turn's, before the
    fits exist)."""
    first: dict[str, int] = {}
    for config in configs:
        first[config.key] = min(first.get(config.key, config.order), config.order)
    return max(first.values(), default=None)


def rounds(configs: list[ConfigPlan]) -> list[list[int]]:
    """The configs' orders grouped into rounds, in run order (pure): every config in exactly one round."""
    closing = last_first_config(configs)
    out: list[list[int]] = []
    shape: _Shape | None = None
    dealt = 0  # fits dealt in the open round
    for config in sorted(configs, key=lambda c: c.order):
        this = _shape(config)
        if out and this is not None and this == shape and dealt % config.folds_parallel:
            out[-1].append(config.order)
        else:
            out.append([config.order])
            dealt = 0
        shape = this
        dealt += config.fits
        if config.order == closing or this is None:
            shape = None  # nothing joins this round
    return out


def first_slots(configs: list[ConfigPlan]) -> dict[int, int]:
    """The slot each config's deal starts on, by order (pure): where its round's earlier configs left off."""
    by_order = {c.order: c for c in configs}
    out: dict[int, int] = {}
    for orders in rounds(configs):
        dealt = 0
        for order in orders:
            config = by_order[order]
            out[order] = dealt % config.folds_parallel
            dealt += config.fits
    return out
