"""Render the boosted trees' categorical-column comparisons (bench/results/{xgb,gbm}_categories.json) into
BENCHMARKS.md, one section a family.

python -m bench.render_tree_categories            # print the sections
python -m bench.render_tree_categories --write    # put them between their markers in BENCHMARKS.md
"""

from __future__ import annotations

import json
import sys
from typing import Any

from bench.sections import RESULTS, put_section, score_text
from bench.tree_categories import LIMIT_ONLY, SETS

BEGIN = "<!-- xgb-categories:begin (python -m bench.render_tree_categories --write) -->"
END = "<!-- xgb-categories:end -->"
GBM_BEGIN = "<!-- gbm-categories:begin (python -m bench.render_tree_categories --write) -->"
GBM_END = "<!-- gbm-categories:end -->"
LIBRARY = {"XGB": "XGBoost", "GBM": "LightGBM"}


def render(key: str = "XGB") -> str:
    r: dict[str, Any] = json.loads((RESULTS / f"{key.lower()}_categories.json").read_text())
    out = _table(key, r, "")
    wide = RESULTS / f"{key.lower()}_categories_wide.json"
    if wide.exists():
        held: dict[str, Any] = json.loads(wide.read_text())
        out += ["", f"The held-out tables (`python -m bench.tree_categories --family {key} --group wide`, "
                f"{held['when']}, load printed): chosen after the limit, each with a column of more than 32 levels.",
                "", *_table(key, held, " (held out)")[2:]]  # fmt: skip
    return "\n".join(out)


def _table(key: str, r: dict[str, Any], mark: str) -> list[str]:
    variants = list(next(iter(r["tables"].values()))["variants"])
    default = next(v for v in variants if v.endswith("(default)"))
    # LightGBM's default compares ways: weighed against the one way it had before (the limit); XGB's against sets.
    base = LIMIT_ONLY if LIMIT_ONLY in variants else SETS
    scored_val = all("val" in s for t in r["tables"].values() for s in t["variants"].values())
    cell = (
        (lambda s: f"{score_text(s['val'])} / {score_text(s['test'])}")
        if scored_val
        else (lambda s: score_text(s["test"]))
    )
    what = "out of fold / test" if scored_val else "test"
    # The folds' kept ways, where the default compares them (XGB's records hold none).
    kept = any(k is not None for t in r["tables"].values() for k in t["variants"][default].get("kept", []))
    out = [
        f"`python -m bench.tree_categories --family {key}` ({r['when']}, {r['cpus']} CPUs, {LIBRARY[key]}'s default "
        f"config bagged over {r['folds']} folds, scored {what} (test rows neither saw); higher is better, rmse "
        "negated; the held-out tables left out).",
        "",
        f"| dataset | rows | metric | string columns (levels) | {' | '.join(variants)} | default - {base} (test) |"
        + (" folds kept (max_native_levels) |" if kept else "")
        + " load before |",
        "|---|---|---|---|" + "---|" * len(variants) + "---|" + ("---|" if kept else "") + "---|",
    ]
    above = below = changed = val_above = 0
    for name, t in r["tables"].items():
        v = t["variants"]
        gap = v[default]["test"] - v[base]["test"]
        # The comparing default differs from the limit alone wherever a string column has more than two levels.
        widest = 2 if base == LIMIT_ONLY else t["limit"]
        if any(n > widest for n in t["levels"].values()):
            changed += 1
            above += int(gap > 0)
            below += int(gap < 0)
            val_above += int(scored_val and v[default]["val"] > v[base]["val"])
        levels = ", ".join(f"{c} {n}" for c, n in t["levels"].items())
        folds = f" {', '.join(str(k) for k in v[default]['kept'])} |" if kept else ""
        cells = " | ".join(cell(v[x]) for x in variants)
        out.append(
            f"| {name}{mark} | {t['rows']:,} | {t['metric']} | {levels} | {cells} | {gap:+.4g} |{folds} "
            f"{t['load_before'][0]} |"
        )
    val = f" (out of fold, above on **{val_above}**)" if scored_val else ""
    where = (
        "with a string column of more than two levels" if base == LIMIT_ONLY else "with a column of more than 32 levels"
    )
    out += [
        "",
        f"On the **{changed}** tables {where} (where the default differs from {base}), the default scores above "
        f"{base} on the test rows on **{above}** and below on **{below}**{val}; on the others the two are the same "
        "model.",
    ]
    return out


def gbm_render() -> str:
    return render("GBM")


if __name__ == "__main__":
    sections = [(BEGIN, END, render), (GBM_BEGIN, GBM_END, gbm_render)]
    for begin, end, make in sections:
        if "--write" in sys.argv[1:]:
            put_section(begin, end, make())
        else:
            print(make())
