"""The decide tests' shared cases: a job document, its pods and an `Observed` built from them, as the watch
cache would hand them to decide.decide, all plain dicts at a fixed NOW."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tabjob.api import parse_manifest
from tabjob.api.errors import SpecError
from tabjob.controller.config import Settings
from tabjob.controller.policy.builders import JobRef, build_children
from tabjob.controller.policy.decision import Observed, rfc3339
from tabjob.controller.policy.kueue import attempt_of
from tabjob.controller.policy.results import plan_summary
from tabjob.planner import plan_job

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
SUMMARY = {
    "bestModel": "WeightedEnsemble",
    "score": 0.99,
    "evalMetric": "roc_auc",
    "fitsDone": 6,
    "fitsFailed": 0,
    "models": [
        {"name": "WeightedEnsemble", "state": "Succeeded", "scoreVal": 0.99, "fitSeconds": 0.1, "device": "cpu"},
        {"name": "GBM", "state": "Succeeded", "scoreVal": 0.98, "fitSeconds": 1.5, "gpus": 0, "device": "cpu"},
    ],
}


def job_doc(status: dict[str, Any] | None = None, **run_policy: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": "qs", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {
            "data": {"train": "sklearn://breast_cancer", "label": "target"},
            "output": {"path": "/output/qs"},
            "resources": {"cpus": 2, "cpusPerPod": 1},
            "models": {"GBM": [{}]},
            "bagging": {"folds": 2},
            "runPolicy": run_policy,
        },
        "status": status or {},
    }


def observe(doc: dict[str, Any], pods: list[dict[str, Any]], now: datetime = NOW, **kw: Any) -> Observed:
    """Observed for `doc` and `pods`; keywords that name a Settings field (retry_base_delay, lost_pod_timeout,
    ...) set that setting, the others Observed's own fields."""
    settings = Settings(**{k: kw.pop(k) for k in list(kw) if k in Settings.__dataclass_fields__})
    status = doc.get("status") or {}
    try:
        job = parse_manifest({k: v for k, v in doc.items() if k != "status"})
        plan = plan_job(job)
        ref = JobRef("qs", "ns", "u1", int(doc["metadata"]["generation"]))
        desired = build_children(job, plan, ref, attempt_of(status), Settings())  # as the reconciler builds them
        plan_json, problems = plan_summary(plan.to_json_dict()), []
    except SpecError as exc:
        desired, plan_json, problems = None, None, exc.lines()
    return Observed(
        job=doc,
        desired=desired,
        plan_json=plan_json,
        spec_problems=problems,
        pods=pods,
        have_configmap=kw.pop("have_configmap", True),
        have_service=kw.pop("have_service", True),
        now=now,
        settings=settings,
        **kw,
    )


def pod(index: int, phase: str = "Running", attempt: int = 0, **state: Any) -> dict[str, Any]:
    name = f"qs-{index}" if attempt == 0 else f"qs-{index}-r{attempt}"
    cs: dict[str, Any] = {"name": "trainer", "state": {"running": {}} if phase == "Running" else {}}
    if "exit" in state:
        cs["state"] = {
            "terminated": {
                "exitCode": state["exit"],
                "reason": state.get("reason", "Error"),
                "message": state.get("message", ""),
                "finishedAt": state.get("at", "x"),
            }
        }
    if "waiting" in state:  # as the kubelet writes them
        cs["image"] = "registry.example/trainer:nope"
        cs["state"] = {"waiting": {"reason": state["waiting"], "message": state.get("why", "back-off pulling image")}}
    status: dict[str, Any] = {
        "phase": phase,
        "containerStatuses": [cs],
        "startTime": state.get("started", rfc3339(NOW)),
    }
    if state.get("unschedulable") or state.get("gated"):
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated" if state.get("gated") else "Unschedulable",
                    "message": state.get("unschedulable") or "Scheduling is blocked due to non-empty scheduling gates",
                    "lastTransitionTime": state.get("since", rfc3339(NOW)),
                }
            ],
        }
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"tabjob.dev/rank": str(index), "tabjob.dev/attempt": str(attempt)},
        "annotations": {"tabjob.dev/generation": str(state.get("generation", 1))},
    }
    if state.get("deleting"):  # True: deletion asked for at NOW (plus a grace period); else the timestamp itself
        meta["deletionTimestamp"] = rfc3339(NOW) if state["deleting"] is True else state["deleting"]
    return {"metadata": meta, "status": status}


def cond(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == ctype)


def names(objs: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]
