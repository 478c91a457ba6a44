"""Render the trees' early-stopping comparison (bench/results/tree_patience.json) into BENCHMARKS.md.

python -m bench.render_tree_patience            # print the section
python -m bench.render_tree_patience --write    # put it between its markers in BENCHMARKS.md
"""

from __future__ import annotations

import json
from typing import Any

from bench.sections import RESULTS, render_main, score_text
from bench.tree_patience import ADAPTIVE, FIXED, VARIANTS

BEGIN = "<!-- tree-patience:begin (python -m bench.render_tree_patience --write) -->"
END = "<!-- tree-patience:end -->"


def render() -> str:
    r: dict[str, Any] = json.loads((RESULTS / "tree_patience.json").read_text())
    variants = {key: list(v) for key, v in VARIANTS.items()}
    head = " | ".join(f"{key} {v} bag / refit" for key, vs in variants.items() for v in vs)
    out = [
        f"`python -m bench.tree_patience` ({r['when']}, {r['cpus']} CPUs, each family's default config bagged over "
        f"{r['folds']} folds, then refit on every row for the folds' mean round count; test rows neither saw; "
        "higher is better, rmse negated; the fresh tables left out).",
        "",
        f"| dataset | rows | metric | default LightGBM | {head} | load before |",
        "|---|---|---|---|" + "---|" * sum(len(v) for v in variants.values()) + "---|",
    ]
    counts: dict[tuple[str, str], list[int]] = {(k, w): [0, 0] for k in variants for w in ("bag", "refit")}
    seconds: dict[str, list[float]] = {f"{k} {v}": [] for k, vs in variants.items() for v in vs}
    for name, t in r["tables"].items():
        cells = []
        for key, vs in variants.items():
            fam = t["families"][key]
            for v in vs:
                s = fam[v]
                took = s["bag_seconds"] + s["refit_seconds"]
                cells.append(f"{score_text(s['bag'])} / {score_text(s['refit'])} ({took:.0f} s)")
                seconds[f"{key} {v}"].append(took)
            for what in ("bag", "refit"):
                gap = fam[ADAPTIVE][what] - fam[FIXED][what]
                counts[(key, what)][0] += int(gap > 0)
                counts[(key, what)][1] += int(gap < 0)
        out.append(
            f"| {name} | {t['rows']:,} | {t['metric']} | {score_text(t['default_lightgbm'])} | {' | '.join(cells)} "
            f"| {t['load_before'][0]} |"
        )
    n = len(r["tables"])
    out += ["", f"The adaptive rule (the default) against the fixed 50 rounds, on {n} tables, by the point score:", ""]
    for key in variants:
        (bag_up, bag_down), (refit_up, refit_down) = counts[(key, "bag")], counts[(key, "refit")]
        fixed, adaptive = sum(seconds[f"{key} {FIXED}"]), sum(seconds[f"{key} {ADAPTIVE}"])
        out.append(
            f"- {key}: the bag above on **{bag_up}**, below on **{bag_down}**; the refit above on **{refit_up}**, "
            f"below on **{refit_down}** (the rest equal); its fits and refits took {adaptive / fixed:.2f}x the fixed "
            f"rule's time ({adaptive:.0f} s against {fixed:.0f} s over all tables)."
        )
    return "\n".join(out)


if __name__ == "__main__":
    render_main(BEGIN, END, render)
