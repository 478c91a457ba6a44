"""Render BENCHMARKS.md's section on the lever named next: pairwise arithmetic features for LightGBM
(bench/results/arithmetic_features.json, written by ``python -m bench.arithmetic_features``).

python -m bench.render_arithmetic            # print the section
python -m bench.render_arithmetic --write    # put it between its markers in BENCHMARKS.md
"""

from __future__ import annotations

import json
from statistics import mean
from typing import Any

from bench.sections import RESULTS, render_main, score_text

BEGIN = "<!-- arithmetic-features:begin (python -m bench.render_arithmetic --write) -->"
END = "<!-- arithmetic-features:end -->"


def _d(v: float) -> str:
    return f"{v:+.4f}" if abs(v) < 100 else f"{v:+,.1f}"


def _counts(rows: list[tuple[float, float, float]]) -> str:
    up = sum(1 for p, a, _ in rows if a > p + 1e-12)
    down = sum(1 for p, a, _ in rows if a < p - 1e-12)
    chosen_up = sum(1 for p, _, c in rows if c > p + 1e-12)
    chosen_down = sum(1 for p, _, c in rows if c < p - 1e-12)
    return (
        f"arithmetic above plain on **{up}**, below on **{down}**; the cross-validation's choice above plain on "
        f"**{chosen_up}**, below on **{chosen_down}**"
    )


def render() -> str:
    path = RESULTS / "arithmetic_features.json"
    if not path.exists():
        return "Not measured yet (`python -m bench.arithmetic_features`)."
    r: dict[str, Any] = json.loads(path.read_text())
    out = [
        f"`python -m bench.arithmetic_features` ({r['when']}, 2 CPUs): LightGBM's defaults on all the training rows "
        f"(row subsampling 0.9, seeds {', '.join(str(s) for s in r['seeds'])}), *plain* on the floor's matrix, "
        f"*arithmetic* with a/b, a*b and a-b for each pair of the (at most {r['top']}) numeric columns the plain fit "
        f"gains most on, *chosen* the one of the two with the better {r['folds']}-fold out-of-fold score on the "
        "training rows, per seed. Test scores are the mean over the seeds (each seed's in the results file); "
        "higher is better, rmse negated.",
        "",
        "| dataset | group | rows | metric | numeric columns (combined) | features | plain test | arithmetic test | "
        "arithmetic - plain | seeds choosing arithmetic | chosen test | chosen - plain |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    seen: list[tuple[float, float, float]] = []
    apart: list[tuple[float, float, float]] = []
    for name, t in r["tables"].items():
        runs = t["runs"]
        plain = mean(x["test"]["plain"] for x in runs)
        arith = mean(x["test"]["arithmetic"] for x in runs)
        chosen = mean(x["chosen_test"] for x in runs)
        picks = sum(1 for x in runs if x["chosen"] == "arithmetic")
        (apart if t["group"] not in ("main", "holdout") else seen).append((plain, arith, chosen))
        out.append(
            f"| {name} | {t['group']} | {t['rows']:,} | {t['metric']} | {t['numeric_columns']} ({t['combined']}) | "
            f"{t['features'][0]} / {t['features'][1]} | {score_text(plain)} | {score_text(arith)} | "
            f"{_d(arith - plain)} | "
            f"{picks} of {len(runs)} | {score_text(chosen)} | {_d(chosen - plain)} |"
        )
    out += [
        "",
        f"By the mean over the seeds, on the {len(seen)} benchmark tables (groups main and holdout): "
        f"{_counts(seen)}. On the {len(apart)} tables kept apart: {_counts(apart)}.",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    render_main(BEGIN, END, render)
