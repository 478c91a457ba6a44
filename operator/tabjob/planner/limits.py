"""Admission-time limits: a plan must fit the objects that carry it, or it is refused before anything is created.

Each limit is Kubernetes' own or one of the CRD's, and each refusal names the limit and the spec field to change:

- fits per job (MAX_FITS) and leaderboard rows (status.models maxItems): plain arithmetic over the spec, checked
  *before* a single fit is materialised (a 2,000,000-fit manifest is refused in microseconds, not 49 s and 3.4 GB);
  the CRD carries the same arithmetic as CEL (api.SPEC_LIMIT_RULES);
- pods (status.plan.pods maxItems): counted once the pods are sized;
- the plan ConfigMap (1 MiB of data, as the API server counts it): measured on the very text the operator writes.
"""

from __future__ import annotations

import json

from tabjob.api import (
    CONFIGMAP_LIMIT,
    MAX_FITS,
    MAX_LEADERBOARD_ROWS,
    MAX_PODS,
    POD_ONLY_FIELDS,
    TabularJobSpec,
)
from tabjob.api.errors import SpecError
from tabjob.contracts.plan import Plan
from tabjob.contracts.pod import PLAN_KEY, SPEC_KEY

MAX_WARNINGS = 64  # status.plan.warnings maxItems


def fit_count(spec: TabularJobSpec) -> int:
    """Fits the plan will hold: configs x trials x (folds x sets when bagged)."""
    per_trial = spec.bagging.folds * spec.bagging.sets if spec.bagging.folds >= 2 else 1
    return spec.models.count() * spec.tuning.trials * per_trial


def leaderboard_rows(spec: TabularJobSpec) -> int:
    """Rows of the leaderboard (and of status.models): one per config and trial, plus the ensemble."""
    return spec.models.count() * spec.tuning.trials + (1 if spec.ensemble.size > 0 else 0)


def check_spec_limits(spec: TabularJobSpec) -> None:
    """The limits that need no plan; cheap, so the planner runs them first."""
    problems: list[tuple[str, str]] = []
    configs, trials = spec.models.count(), spec.tuning.trials
    rows = leaderboard_rows(spec)
    if rows > MAX_LEADERBOARD_ROWS:
        ensemble = " + the ensemble" if spec.ensemble.size > 0 else ""
        problems.append(
            (
                "spec.tuning.trials",
                f"{configs} model config(s) x {trials} trial(s){ensemble} = {rows} leaderboard rows, over the "
                f"{MAX_LEADERBOARD_ROWS} that status.models holds; use fewer configs or trials",
            )
        )
    fits = fit_count(spec)
    if fits > MAX_FITS:
        bagged = f" x {spec.bagging.folds} fold(s) x {spec.bagging.sets} set(s)" if spec.bagging.folds >= 2 else ""
        problems.append(
            (
                "spec.tuning.trials",
                f"{configs} model config(s) x {trials} trial(s){bagged} = {fits} fits, over the limit of "
                f"{MAX_FITS} per job (every fit is a line of the plan ConfigMap); use fewer trials, folds or sets",
            )
        )
    if problems:
        raise SpecError(problems)


def check_pod_count(spec: TabularJobSpec, pods: int) -> None:
    if pods <= MAX_PODS:
        return
    if spec.resources.gpus > 0:
        field, hint = "spec.resources.gpusPerPod", "raise gpusPerPod or lower the GPUs the fits use at once"
    else:
        field, hint = "spec.resources.cpusPerPod", "raise cpusPerPod or lower the CPUs the fits use at once"
    raise SpecError.at(field, f"the plan needs {pods} pods, over the {MAX_PODS} that status.plan.pods holds; {hint}")


def configmap_data(spec: TabularJobSpec, plan: Plan) -> dict[str, str]:
    """The plan ConfigMap's data, exactly as the operator writes it: the spec and the full plan."""
    spec_json = spec.model_dump(by_alias=True, exclude_none=True, mode="json", exclude=set(POD_ONLY_FIELDS))
    return {
        SPEC_KEY: json.dumps(spec_json, indent=2, sort_keys=True),
        PLAN_KEY: plan.to_json(indent=2),
    }


def configmap_bytes(data: dict[str, str]) -> int:
    """Size as the API server counts it for the 1 MiB limit: every key and value, in bytes."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in data.items())


def check_configmap(spec: TabularJobSpec, plan: Plan) -> None:
    size = configmap_bytes(configmap_data(spec, plan))
    if size > CONFIGMAP_LIMIT:
        raise SpecError.at(
            "spec.tuning.trials",
            f"the plan ConfigMap would hold {size} bytes ({len(plan.fits)} fits), over Kubernetes' limit of "
            f"{CONFIGMAP_LIMIT} (1 MiB); use fewer trials, folds or sets, or smaller hyperparameters",
        )


def capped_warnings(warnings: list[str]) -> list[str]:
    """At most what status.plan.warnings holds; the last line says how many more there were."""
    if len(warnings) <= MAX_WARNINGS:
        return warnings
    kept = warnings[: MAX_WARNINGS - 1]
    return [*kept, f"... and {len(warnings) - len(kept)} more warning(s)"]
