"""Property tests of the planner's invariants over generated specs (hypothesis)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tabjob.api import parse_manifest
from tabjob.api.errors import SpecError
from tabjob.contracts.plan import Plan
from tabjob.planner import plan
from tabjob.planner.rounds import rounds
from tests.unit.manifests import spec

GPU_AMOUNTS = [0, 0.25, 1 / 3, 0.5, 1]


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    cpus = draw(st.integers(1, 64))
    gpus = draw(st.sampled_from([0, 1, 2, 3, 4, 8, 12]))
    folds = draw(st.sampled_from([0, 2, 3, 5, 8]))
    resources: dict[str, Any] = {"cpus": cpus, "gpus": gpus, "gpusPerPod": draw(st.sampled_from([1, 2, 4, 8]))}
    if gpus == 0 and draw(st.booleans()):
        resources["cpusPerPod"] = draw(st.integers(1, 32))
    bagging: dict[str, Any] = {"folds": folds}
    if folds and draw(st.booleans()):
        bagging["resources"] = {"cpus": draw(st.integers(1, cpus)), "gpus": draw(st.integers(0, gpus))}
    models: dict[str, list] = {}
    for key in draw(st.lists(st.sampled_from(["GBM", "NN_TORCH"]), min_size=1, max_size=2, unique=True)):
        configs = []
        for _ in range(draw(st.integers(1, 3))):
            cfg: dict[str, Any] = {}
            if draw(st.booleans()):
                cfg["resources"] = {"cpus": draw(st.integers(1, 16)), "gpus": draw(st.sampled_from(GPU_AMOUNTS))}
            configs.append(cfg)
        models[key] = configs
    return spec(
        resources=resources,
        bagging=bagging,
        models=models,
        tuning={"trials": draw(st.integers(1, 6))},
    )


def _plan(doc: dict[str, Any]) -> Plan:
    try:
        return plan(parse_manifest(doc).spec, "p")
    except SpecError:
        assume(False)  # invalid specs are the catalogue's business; here only valid ones count
        raise


@settings(max_examples=400, deadline=None)
@given(specs())
def test_peak_never_exceeds_budget(doc: dict[str, Any]) -> None:
    p = _plan(doc)
    budget = doc["spec"]["resources"]
    assert p.peak.cpus <= budget["cpus"]
    assert p.peak.gpus <= budget["gpus"] + 1e-9


@settings(max_examples=400, deadline=None)
@given(specs())
def test_pods_hold_whole_gpus_summing_to_ceil_peak(doc: dict[str, Any]) -> None:
    p = _plan(doc)
    per_pod = doc["spec"]["resources"]["gpusPerPod"]
    assert all(isinstance(pod.gpus, int) and pod.gpus <= per_pod for pod in p.pods)
    assert sum(pod.gpus for pod in p.pods) == math.ceil(p.peak.gpus - 1e-9)
    if p.peak.gpus > 0:
        assert all(pod.procs == pod.gpus for pod in p.pods), "one rank per GPU"
    assert len(p.pods) == math.ceil(sum(pod.gpus for pod in p.pods) / per_pod) or p.peak.gpus == 0


@settings(max_examples=400, deadline=None)
@given(specs())
def test_no_gpu_carries_more_than_one_at_once(doc: dict[str, Any]) -> None:
    p = _plan(doc)
    for c in p.configs:
        load: dict[tuple[int, str], float] = defaultdict(float)
        slots = {f.slot: f for f in p.fits if f.order == c.order}
        for f in slots.values():
            if f.device != "cpu":
                for r in f.ranks:
                    load[(r, f.device)] += f.gpus / f.processes
        assert all(v <= 1 + 1e-9 for v in load.values()), load


@settings(max_examples=400, deadline=None)
@given(specs())
def test_concurrency_is_trials_times_folds(doc: dict[str, Any]) -> None:
    p = _plan(doc)
    assert p.concurrency.fits == p.concurrency.trials * p.concurrency.folds
    for c in p.configs:
        assert c.slots == c.trials_parallel * c.folds_parallel
        assert len({f.slot for f in p.fits if f.order == c.order}) <= c.slots
        assert c.peak.cpus == c.cpus * c.slots


@settings(max_examples=300, deadline=None)
@given(specs())
def test_every_rank_belongs_to_a_pod_and_cpus_add_up(doc: dict[str, Any]) -> None:
    p = _plan(doc)
    assert sum(pod.procs for pod in p.pods) == p.world_size
    assert [pod.first_rank for pod in p.pods] == [sum(q.procs for q in p.pods[:i]) for i in range(len(p.pods))]
    assert all(0 <= r < p.world_size for f in p.fits for r in f.ranks)
    assert p.requested.cpus == sum(pod.cpus for pod in p.pods) >= p.peak.cpus
    cpus_per_pod = doc["spec"]["resources"].get("cpusPerPod")
    if cpus_per_pod and p.peak.gpus == 0:
        assert all(pod.cpus <= cpus_per_pod for pod in p.pods)


@settings(max_examples=300, deadline=None)
@given(specs())
def test_rounds_cover_every_config_once_and_keep_their_slots_even(doc: dict[str, Any]) -> None:
    p = _plan(doc)
    found = rounds(p.configs)
    assert [o for r in found for o in r] == sorted(c.order for c in p.configs)
    by_order = {c.order: c for c in p.configs}
    for orders in found:
        members = [by_order[o] for o in orders]
        if len(members) > 1:  # one shape, one process and one trial at a time
            assert len({(c.cpus, c.gpus, c.folds_parallel) for c in members}) == 1, members
            assert all(c.processes == 1 and c.trials_parallel == 1 for c in members), members
        if all(c.trials_parallel == 1 for c in members):
            # One deal over the round: no slot holds more than one fit more than another.
            load = Counter(f.slot for f in p.fits if f.order in orders)
            slots = range(members[0].slots) if sum(c.fits for c in members) >= members[0].slots else load
            assert max(load[s] for s in slots) - min(load[s] for s in slots) <= 1, (orders, load)
