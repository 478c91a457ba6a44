"""Admission-time limits: the planner refuses plans past what pods, status and the plan ConfigMap can hold."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tabjob.api import CONFIGMAP_LIMIT, MAX_FITS, MAX_LEADERBOARD_ROWS, MAX_PODS, parse_manifest
from tabjob.api.errors import SpecError
from tabjob.controller.policy.builders import JobRef, build_configmap
from tabjob.planner import plan
from tabjob.planner.limits import MAX_WARNINGS, capped_warnings, configmap_bytes, fit_count, leaderboard_rows
from tests.unit.manifests import spec


def _plan(**patch: Any) -> Any:
    return plan(parse_manifest(spec(**patch)).spec, "t")


def _refusal(**patch: Any) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        _plan(**patch)
    return info.value.problems


def _configs(n: int) -> dict[str, Any]:
    return {"GBM": [{"name": f"G{i}"} for i in range(n)]}


def test_leaderboard_rows_at_the_limit_and_one_past() -> None:
    at = _plan(models=_configs(MAX_LEADERBOARD_ROWS - 1))  # + the ensemble = 64
    assert leaderboard_rows(parse_manifest(spec(models=_configs(MAX_LEADERBOARD_ROWS - 1))).spec) == 64
    assert len(at.configs) == 63
    [(path, msg)] = _refusal(models=_configs(MAX_LEADERBOARD_ROWS))
    assert path == "spec.tuning.trials" and "65 leaderboard rows, over the 64 that status.models holds" in msg
    # Without the ensemble, 64 configs fit.
    assert len(_plan(models=_configs(64), ensemble={"size": 0}).configs) == 64


def test_fits_at_the_limit_and_one_past() -> None:
    at = _plan(models=_configs(10), bagging={"folds": 10, "sets": 10})
    assert len(at.fits) == MAX_FITS
    [(path, msg)] = _refusal(models=_configs(7), bagging={"folds": 11, "sets": 13})
    assert path == "spec.tuning.trials" and "= 1001 fits, over the limit of 1000 per job" in msg


def test_fit_count_is_arithmetic_and_matches_the_plan() -> None:
    for patch in ({}, {"bagging": {"folds": 3, "sets": 2}}, {"tuning": {"trials": 4}, "models": _configs(3)}):
        s = parse_manifest(spec(**patch)).spec
        assert fit_count(s) == len(plan(s, "t").fits)


def test_pods_at_the_limit_and_one_past() -> None:
    def gpu_job(gpus: int) -> dict[str, Any]:
        return {
            "resources": {"cpus": gpus, "gpus": gpus, "gpusPerPod": 1},
            "models": {"NN_TORCH": [{"processes": gpus, "resources": {"cpus": gpus, "gpus": gpus}}]},
        }

    assert len(_plan(**gpu_job(MAX_PODS)).pods) == 64
    [(path, msg)] = _refusal(**gpu_job(MAX_PODS + 1))
    assert path == "spec.resources.gpusPerPod" and "65 pods, over the 64 that status.plan.pods holds" in msg
    [(path, msg)] = _refusal(resources={"cpus": 65, "cpusPerPod": 1}, bagging={"folds": 65})
    assert path == "spec.resources.cpusPerPod" and "65 pods" in msg


def test_configmap_is_measured_on_what_the_operator_writes() -> None:
    job = parse_manifest(spec(bagging={"folds": 10}))
    p = plan(job.spec, "t")
    cm = build_configmap(job, p, JobRef(name="t", namespace="ns", uid="u"))
    assert configmap_bytes(cm["data"]) == sum(len(k) + len(v.encode()) for k, v in cm["data"].items())
    assert json.loads(cm["data"]["plan.json"])["fits"][0]["id"] == p.fits[0].id


def test_configmap_over_one_mebibyte_is_refused() -> None:
    big = {"GBM": [{"hyperparameters": {"forcedsplits_filename": "x" * 1500}}]}
    [(path, msg)] = _refusal(models=big, bagging={"folds": 100, "sets": 8})
    assert path == "spec.tuning.trials" and f"over Kubernetes' limit of {CONFIGMAP_LIMIT} (1 MiB)" in msg
    assert len(_plan(models=big, bagging={"folds": 100, "sets": 2}).fits) == 200  # 200 such fits fit


def test_warnings_stay_within_the_status_list() -> None:
    many = {"GBM": [{"resources": {"gpus": 1}}], "NN_TORCH": [{"resources": {"gpus": 0}} for _ in range(63)]}
    p = _plan(resources={"cpus": 8, "gpus": 1}, models=many, ensemble={"size": 0})
    assert len(p.warnings) <= MAX_WARNINGS
    capped = capped_warnings([f"w{i}" for i in range(70)])
    assert len(capped) == MAX_WARNINGS and capped[-1] == "... and 7 more warning(s)"
