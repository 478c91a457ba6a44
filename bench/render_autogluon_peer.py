"""Render the AutoGluon peer section of BENCHMARKS.md from bench/results/autogluon_peer.json."""

from __future__ import annotations

import json
import sys
from typing import Any

from bench.common import RESULTS


def _f(v: float) -> str:
    return f"{v:.4f}" if abs(v) < 100 else f"{v:,.1f}"


def _trained(side: dict[str, Any]) -> str:
    """Base models on the leaderboard (the ensemble left out): what finished inside the time limit."""
    return str(
        sum(
            1
            for row in side["leaderboard"]
            if not row["model"].startswith("WeightedEnsemble") and row["score_val"] is not None
        )
    )


def render(name: str = "autogluon_peer") -> str:
    r: dict[str, Any] = json.loads((RESULTS / f"{name}.json").read_text())
    rows = r["datasets"]
    score_met = sum(1 for e in rows.values() if e["score_met"])
    time_met = sum(1 for e in rows.values() if e["time_met"])
    out = [
        "## AutoGluon peer",
        "",
        f"`bench/autogluon_peer.py` ({r['when']}, {r['cpus']} cores shared with other work; load average at the "
        f"end {r['load_average_1m_5m_15m'][0]} (1 min) / {r['load_average_1m_5m_15m'][1]} (5 min), per dataset "
        f"below): tabjob against AutoGluon {r['autogluon']} in its own virtualenv, same model families (GBM, "
        f"NN_TORCH), {r['folds']} bagging folds, a weighted ensemble, {r['cpus_given']} CPUs and a "
        f"{r['time_limit_seconds']} s time limit for both, on tables that ship inside PyPI packages "
        "(scikit-learn, plotnine, statsmodels) with a fixed seeded 75/25 split. Each side's deployed model is its "
        "validation-best one; test scores are on rows neither saw (higher is better, rmse negated). tabjob's wall "
        "time is `tabjob run` end to end as a fresh process (in brackets: from the job's start, ranks up and data "
        "loaded, to its end); AutoGluon's is its `fit()` alone (its whole process in brackets). The systems "
        "alternate which runs first.",
        "",
        "| dataset | rows x cols | metric | tabjob best | tabjob test | AutoGluon best | AutoGluon test | "
        "default LightGBM test | tabjob - AutoGluon | tabjob wall s (training) | AutoGluon fit s (process) | "
        "models trained (tabjob / AutoGluon) | load before / after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for ds, e in rows.items():
        t, a = e["tabjob"], e["autogluon"]
        gap = e["test_gap"]
        mark = "" if e["score_met"] else " (**behind**)"
        slow = "" if e["time_met"] else " (**slower**)"
        out.append(
            f"| {ds} | {e['rows']:,} x {e['columns']} | {e['metric']} | {t['best_model']} | {_f(t['test'])} | "
            f"{a['best_model']} | {_f(a['test'])} | {_f(e['default_lightgbm_test'])} | {gap:+.4g}{mark} | "
            f"{t['wall_seconds']:.0f} ({t['training_seconds']:.0f}){slow} | "
            f"{a['fit_seconds']:.0f} ({a['wall_seconds']:.0f}) | "
            f"{_trained(t)} / {_trained(a)} | {e['load_before'][0]} / {e['load_after'][0]} |"
        )
    n = len(rows)
    out += [
        "",
        f"Test score at or above AutoGluon's on **{score_met} of {n}** datasets; tabjob's whole run within "
        f"AutoGluon's fit time on **{time_met} of {n}**; at or above a default LightGBM on "
        f"**{sum(1 for e in rows.values() if e['not_below_default_lightgbm'])} of {n}**.",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    print(render(*sys.argv[1:]))
