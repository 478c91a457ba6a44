"""The trainer's RunSummary (contracts/results.py) from a termination message -> status fields."""

from __future__ import annotations

from typing import Any

from tabjob.contracts.results import NOT_IN_STATUS, ModelResult, RunSummary
from tabjob.controller.policy import pods as podstate

# What status.models[] shows of a trainer's ModelResult: api.status.ModelStatus declares exactly these.
_STATUS_ROW = set(ModelResult.model_fields) - set(NOT_IN_STATUS)


parse_summary = podstate.trainer_verdict  # the trainer's RunSummary from a termination message, or None


def results_from_summary(summary: RunSummary) -> dict[str, Any]:
    """Status fields from the trainer's summary (one spelling: the contract in contracts/results.py)."""
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
    if summary.output_uri:
        out["outputUri"] = summary.output_uri
    if summary.fallbacks:  # the trainer counts them (RunSummary.fallbacks); rows may have been trimmed to fit 4 KiB
        out["fallbacks"] = summary.fallbacks
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


def plan_summary(plan: dict[str, Any]) -> dict[str, Any]:
    """The full plan's JSON (Plan.to_json_dict) as status publishes it (status.plan): pods and totals, `fits` the
    number of fits. The list of fits stays in the ConfigMap; the reconciler keeps only this in memory."""
    return {
        "pods": [
            {k: p[k] for k in ("name", "cpus", "gpus", "memory", "procs") if p.get(k) is not None} for p in plan["pods"]
        ],
        "worldSize": plan["worldSize"],
        "concurrency": plan["concurrency"],
        "peak": plan["peak"],
        "requested": plan["requested"],
        "fits": len(plan["fits"]),
        "warnings": plan.get("warnings", []),
    }
