"""The planner against the README's worked examples and the rules around them (table-driven)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tabjob.api import load_manifest, parse_manifest
from tabjob.families import GBM
from tabjob.planner import plan, plan_job
from tests.unit.manifests import spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_autogluon_tutorial_example_plans_exactly() -> None:
    """32 CPUs / 4 GPUs; bagged model 10/2; NN_TORCH per fold 4 CPUs / 0.5 GPU; 2 folds; 2 trials."""
    p = plan_job(load_manifest(EXAMPLES / "autogluon-tutorial.yaml"))
    assert (p.concurrency.trials, p.concurrency.folds, p.concurrency.fits) == (2, 2, 4)
    assert (p.peak.cpus, p.peak.gpus) == (16, 2.0)
    assert sum(pod.gpus for pod in p.pods) == 2
    assert p.requested.gpus == 2 and p.requested.cpus == 16
    assert p.world_size == 2
    # Two 0.5-GPU fits share each rank's GPU.
    by_device: dict[tuple[int, str], float] = {}
    for f in p.fits:
        by_device[(f.rank, f.device)] = by_device.get((f.rank, f.device), 0) + f.gpus
    assert by_device == {(0, "cuda:0"): 1.0, (1, "cuda:1"): 1.0}
    assert any("request the peak" in w for w in p.warnings)


def test_gbm_cpu_and_gpu_side_by_side() -> None:
    p = plan_job(load_manifest(EXAMPLES / "gbm-cpu-and-gpu.yaml"))
    assert [(c.name, c.cpus, c.gpus) for c in p.configs] == [("GBM_CPU", 8, 0.0), ("GBM_GPU", 8, 1.0)]
    assert (p.peak.cpus, p.peak.gpus) == (8, 1.0)
    assert [(pod.gpus, pod.procs) for pod in p.pods] == [(1, 1)]
    assert [f.device for f in p.fits] == ["cpu", "cuda:0"]


def test_cpu_quickstart_two_pods_one_group() -> None:
    p = plan_job(load_manifest(EXAMPLES / "quickstart.yaml"))
    assert [(pod.cpus, pod.procs, pod.first_rank) for pod in p.pods] == [(1, 1, 0), (1, 1, 1)]
    assert p.world_size == 2
    assert all(f.cpus == 1 for f in p.fits)
    assert (p.concurrency.folds, p.concurrency.fits) == (2, 2)
    assert p.peak.cpus == 2 and p.requested.gpus == 0


def test_ddp_fit_spans_two_ranks_in_two_pods() -> None:
    p = plan_job(load_manifest(EXAMPLES / "ddp-2gpu-nn.yaml"))
    assert len(p.fits) == 1
    fit = p.fits[0]
    assert fit.ranks == [0, 1] and fit.processes == 2 and fit.device == "cuda:0"
    assert [(pod.gpus, pod.procs) for pod in p.pods] == [(1, 1), (1, 1)]


@pytest.mark.parametrize(
    ("resources", "expected_pods"),
    [
        ({"cpus": 64, "gpus": 16, "gpusPerPod": 8}, [8, 8]),
        ({"cpus": 64, "gpus": 10, "gpusPerPod": 8}, [5, 5]),
        ({"cpus": 64, "gpus": 7, "gpusPerPod": 4}, [4, 3]),
        ({"cpus": 64, "gpus": 3, "gpusPerPod": 1}, [1, 1, 1]),
        ({"cpus": 64, "gpus": 4}, [4]),
    ],
)
def test_whole_gpu_pods_never_exceed_gpus_per_pod(resources: dict, expected_pods: list[int]) -> None:
    gpus = resources["gpus"]
    doc = spec(
        resources=resources,
        models={"NN_TORCH": [{"resources": {"cpus": 4, "gpus": 1}}]},
        bagging={"folds": gpus if gpus >= 2 else 2},
    )
    p = plan(parse_manifest(doc).spec, "t")
    assert [pod.gpus for pod in p.pods] == expected_pods
    assert all(pod.procs == pod.gpus for pod in p.pods)
    assert p.world_size == sum(expected_pods)


@pytest.mark.parametrize(
    ("bagging", "model_resources", "cpus", "gpus"),
    [
        # Bagging: each omitted dimension is E split over the folds (CPUs floored, at least 1).
        ({"folds": 3, "resources": {"cpus": 10, "gpus": 3}}, None, 3, 1.0),
        ({"folds": 4, "resources": {"cpus": 8, "gpus": 2}}, None, 2, 0.5),
        ({"folds": 3, "resources": {"cpus": 2, "gpus": 2}}, None, 1, 0.5),  # 2/3 GPU rounds down to 1/2
        ({"folds": 5}, None, 3, 0.0),  # E defaults to the budget 16 CPUs / 0 GPU... here gpus 0
        ({"folds": 2, "resources": {"cpus": 8}}, {"gpus": 0.25}, 4, 0.25),
        # No bagging: the budget's.
        ({}, None, 16, 0.0),
        ({}, {"cpus": 3}, 3, 0.0),
    ],
)
def test_inherited_fit_resources(bagging: dict, model_resources: dict | None, cpus: int, gpus: float) -> None:
    budget_gpus = 4 if (bagging.get("resources", {}).get("gpus") or (model_resources or {}).get("gpus")) else 0
    cfg = {"resources": model_resources} if model_resources else {}
    doc = spec(resources={"cpus": 16, "gpus": budget_gpus}, models={"NN_TORCH": [cfg]}, bagging=bagging)
    c = plan(parse_manifest(doc).spec, "t").configs[0]
    assert (c.cpus, c.gpus) == (cpus, gpus)


def test_inherited_gpus_capped_at_one_per_process() -> None:
    doc = spec(resources={"cpus": 8, "gpus": 4}, models={"GBM": [{}], "NN_TORCH": [{}]})
    p = plan(parse_manifest(doc).spec, "t")
    assert [(c.key, c.gpus) for c in p.configs] == [("GBM", 1.0), ("NN_TORCH", 1.0)]
    assert p.requested.gpus == 1
    assert any("request the peak" in w for w in p.warnings)


def test_trials_in_parallel_and_sampled_hyperparameters() -> None:
    doc = spec(
        resources={"cpus": 8},
        models={"GBM": [{"resources": {"cpus": 2}, "hyperparameters": {"num_leaves": 31}}]},
        tuning={"trials": 6, "searchSpace": {"GBM": {"num_leaves": {"int": [16, 64]}}}},
    )
    p = plan(parse_manifest(doc).spec, "t")
    assert p.configs[0].trials_parallel == 4
    params = [f.hyperparameters for f in p.fits]
    assert params[0] == {**GBM.defaults, "num_leaves": 31}  # trial 0 trains the config as written
    assert all(16 <= hp["num_leaves"] <= 64 and hp.keys() == GBM.defaults.keys() for hp in params[1:])
    assert p.fits == plan(parse_manifest(doc).spec, "t").fits  # seeded: the same plan twice


def test_bag_sets_multiply_fits() -> None:
    doc = spec(models={"GBM": [{"resources": {"cpus": 1}}]}, bagging={"folds": 3, "sets": 2})
    p = plan(parse_manifest(doc).spec, "t")
    assert len(p.fits) == 6
    assert sorted({(f.bag_set, f.fold) for f in p.fits}) == [(b, f) for b in range(2) for f in range(3)]


def test_cpu_job_spreads_ranks_over_cpus_per_pod() -> None:
    doc = spec(
        resources={"cpus": 8, "cpusPerPod": 4, "memory": "8Gi"},
        models={"GBM": [{"resources": {"cpus": 2}}]},
        bagging={"folds": 4},
    )
    p = plan(parse_manifest(doc).spec, "t")
    assert [(pod.cpus, pod.procs, pod.memory) for pod in p.pods] == [(4, 2, "4Gi"), (4, 2, "4Gi")]
    assert sorted(f.rank for f in p.fits) == [0, 1, 2, 3]


def test_fractional_fits_never_overfill_a_gpu() -> None:
    doc = spec(
        resources={"cpus": 12, "gpus": 2},
        models={"NN_TORCH": [{"resources": {"cpus": 1, "gpus": 1 / 3}}]},
        bagging={"folds": 6},
    )
    p = plan(parse_manifest(doc).spec, "t")
    load: dict[int, float] = {}
    for f in p.fits:
        load[f.rank] = load.get(f.rank, 0) + f.gpus
    assert all(v <= 1 + 1e-9 for v in load.values())
    assert p.requested.gpus == math.ceil(p.peak.gpus - 1e-9) == 2
