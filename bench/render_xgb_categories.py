"""Render XGB's categorical-column comparison (bench/results/xgb_categories.json) into BENCHMARKS.md.

python -m bench.render_xgb_categories            # print the section
python -m bench.render_xgb_categories --write    # put it between its markers in BENCHMARKS.md
"""

from __future__ import annotations

import json
from typing import Any

from bench.sections import RESULTS, render_main
from bench.xgb_categories import CODES, LIMIT, SETS

BEGIN = "<!-- xgb-categories:begin (python -m bench.render_xgb_categories --write) -->"
END = "<!-- xgb-categories:end -->"


def _f(v: float) -> str:
    return f"{v:.4f}" if abs(v) < 100 else f"{v:,.1f}"


def render() -> str:
    r: dict[str, Any] = json.loads((RESULTS / "xgb_categories.json").read_text())
    out = [
        f"`python -m bench.xgb_categories` ({r['when']}, {r['cpus']} CPUs, XGBoost's default config bagged over "
        f"{r['folds']} folds, test rows neither saw; higher is better, rmse negated; the fresh tables left out).",
        "",
        "| dataset | rows | metric | string columns (levels) | every column as sets | up to 32 levels as sets "
        "(default) | ordinal codes | default - every column as sets | load before |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    above = below = changed = 0
    for name, t in r["tables"].items():
        v = {k: s["test"] for k, s in t["variants"].items()}
        gap = v[LIMIT] - v[SETS]
        if any(n > t["limit"] for n in t["levels"].values()):
            changed += 1
            above += int(gap > 0)
            below += int(gap < 0)
        levels = ", ".join(f"{c} {n}" for c, n in t["levels"].items())
        out.append(
            f"| {name} | {t['rows']:,} | {t['metric']} | {levels} | {_f(v[SETS])} | {_f(v[LIMIT])} | {_f(v[CODES])} "
            f"| {gap:+.4g} | {t['load_before'][0]} |"
        )
    out += [
        "",
        f"On the **{changed}** tables with a column of more than 32 levels (where the default differs from sets for "
        f"every column), the default scores above sets for every column on **{above}** and below on **{below}**; "
        "on the others the two are the same model.",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    render_main(BEGIN, END, render)
