"""The trainer's RunSummary (results_model.py) from a termination message -> status fields."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tabjob.operator import pods as podstate
from tabjob.results_model import RunSummary

_STATUS_ROW = {"name", "state", "score_val", "score_test", "fit_seconds", "gpus", "device"}


def parse_summary(message: str | None) -> RunSummary | None:
    """The trainer's RunSummary from a termination message; a log tail (FallbackToLogsOnError) is not one."""
    if not message:
        return None
    try:
        return RunSummary.model_validate_json(message, by_name=False)  # the wire spelling only
    except ValidationError:
        return None


def results_from_summary(summary: RunSummary) -> dict[str, Any]:
    """Status fields from the trainer's summary (one spelling: the contract in results_model.py)."""
    out: dict[str, Any] = {
        "models": [m.model_dump(by_alias=True, exclude_none=True, include=_STATUS_ROW) for m in summary.models]
    }
    if summary.best_model:
        out["bestModel"] = summary.best_model
    if summary.score is not None:
        out["score"] = summary.score
    if summary.eval_metric:
        out["evalMetric"] = summary.eval_metric
    if summary.export_path:
        out["exportPath"] = summary.export_path
    fallbacks = max(summary.fallbacks, sum(1 for m in summary.models if m.fallback))
    if fallbacks:
        out["fallbacks"] = fallbacks
    progress: dict[str, Any] = {"fitsDone": summary.fits_done, "fitsFailed": summary.fits_failed}
    if summary.fits_total:
        progress["fitsTotal"] = summary.fits_total
    out["progress"] = progress
    return out


def summaries(pods: list[dict[str, Any]]) -> list[RunSummary]:
    """Summaries from the pods' termination messages, rank 0 first (it gathers the results)."""
    out = []
    for pod in sorted(pods, key=podstate.rank):
        summary = parse_summary((podstate.terminated(pod) or {}).get("message"))
        if summary is not None:
            out.append(summary)
    return out


def progress_summary(progress: dict[str, Any]) -> str:
    text = f"{progress.get('fitsDone', 0)}/{progress.get('fitsTotal', 0)}"
    if progress.get("fitsFailed"):
        text += f" ({progress['fitsFailed']} failed)"
    return text


def plan_summary(plan_json: dict[str, Any]) -> dict[str, Any]:
    """The plan as published in status: pods and totals; the full plan with every fit stays in the ConfigMap.
    `fits` may already be a count (the reconciler keeps no fit list in memory)."""
    return {
        "pods": [
            {k: p[k] for k in ("name", "cpus", "gpus", "memory", "procs") if p.get(k) is not None}
            for p in plan_json["pods"]
        ],
        "worldSize": plan_json["worldSize"],
        "concurrency": plan_json["concurrency"],
        "peak": plan_json["peak"],
        "requested": plan_json["requested"],
        "fits": plan_json["fits"] if isinstance(plan_json["fits"], int) else len(plan_json["fits"]),
        "warnings": plan_json.get("warnings", []),
    }
