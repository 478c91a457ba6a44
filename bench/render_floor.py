"""Render BENCHMARKS.md's floor sections: the mechanism (bench/results/floor_mechanism.json), the floor on every table
(bench/results/floor.json), the floor on the tables kept apart (bench/results/floor_heldout.json) and the new families
(bench/results/family_compare_new.json).

python -m bench.render_floor            # print the four sections
python -m bench.render_floor --write    # put them between their markers in BENCHMARKS.md
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

from bench.sections import RESULTS, score_text, write_section

BEGIN = "<!-- floor-section:begin (python -m bench.render_floor --write) -->"
END = "<!-- floor-section:end -->"
HELDOUT_BEGIN = "<!-- floor-heldout:begin (python -m bench.render_floor --write) -->"
HELDOUT_END = "<!-- floor-heldout:end -->"
MECHANISM_BEGIN = "<!-- floor-mechanism:begin (python -m bench.render_floor --write) -->"
MECHANISM_END = "<!-- floor-mechanism:end -->"
FAMILIES_BEGIN = "<!-- new-families:begin (python -m bench.render_floor --write) -->"
FAMILIES_END = "<!-- new-families:end -->"


def _gap(g: dict[str, Any] | None) -> str:
    return "-" if g is None else f"{g['mean']:+.4g} [{g['low']:+.4g}, {g['high']:+.4g}] {g['verdict']}"


def floor_section(name: str = "floor") -> str:
    path = RESULTS / f"{name}.json"
    if not path.exists():
        return f"Not measured yet (`python -m bench.floor --name {name}`)."
    r: dict[str, Any] = json.loads(path.read_text())
    tables = r["tables"]
    groups = r.get("groups") or []
    command = f"--seconds {r['seconds']}" + (f" --groups {','.join(groups)} --name {name}" if groups else "")
    out = [
        f"`python -m bench.floor {command}` ({r['when']}, {r['folds']} folds, `preset: best`, "
        f"`refitFull: true`, 2 CPUs, {len(tables)} tables; test rows neither side saw; higher is better, rmse "
        "negated). *deployed* is rows[0] of the leaderboard (what predict runs), *bags* the weighted ensemble of the "
        "bags in the same run (what tabjob deployed before refitFull), *floor* a default "
        "`LGBMClassifier`/`LGBMRegressor` on all the training rows; gaps are paired bootstraps over the test rows "
        "(2,000 draws, 95%).",
        "",
        "| dataset | train rows | metric | deployed | deployed test | bags test | floor test | deployed - floor "
        "[95%] | bags - floor [95%] | models | wall s | load before / after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    at_or_above = bags_at = 0
    for name, e in tables.items():
        floor = e["default_lightgbm_test"]
        deployed, bags = e["deployed_test"], e.get("bags_test")
        at_or_above += deployed >= floor - 1e-12
        bags_at += bags is not None and bags >= floor - 1e-12
        below = "" if deployed >= floor - 1e-12 else " (**below**)"
        out.append(
            f"| {name} | {round(e['rows'] * 0.75):,} | {e['metric']} | {e['deployed']} | "
            f"{score_text(deployed)}{below} | "
            f"{score_text(bags)} | {score_text(floor)} | {_gap(e.get('deployed_gap'))} | {_gap(e.get('bags_gap'))} | "
            f"{e['models_trained']} | {e['wall_seconds']:.0f} | {e['load_before'][0]} / {e['load_after'][0]} |"
        )
    n = len(tables)
    losses = sum(1 for e in tables.values() if (e.get("deployed_gap") or {}).get("verdict") == "loss")
    bag_losses = sum(1 for e in tables.values() if (e.get("bags_gap") or {}).get("verdict") == "loss")
    refits = sum(1 for e in tables.values() if e["deployed"].endswith("_FULL"))
    out += [
        "",
        f"Deployed model at or above the default LightGBM by the point score on **{at_or_above} of {n}** tables "
        f"(significantly below it on **{losses}**); the bags' ensemble alone on **{bags_at} of {n}** "
        f"(significantly below on **{bag_losses}**). A refit was deployed on **{refits} of {n}**.",
    ]
    commits = Counter(e["commit"] for e in tables.values())  # bench/floor.py records each table's
    if len(commits) > 1:  # tables run again with --merge: say at which code
        most = commits.most_common(1)[0][0]
        again = ", ".join(f"{k} at {e['commit']}" for k, e in tables.items() if e["commit"] != most)
        out.append(f"Run again with `--only NAME --merge`: {again}; the others at {most}.")
    return "\n".join(out)


def heldout_section() -> str:
    return floor_section("floor_heldout")


def mechanism_section() -> str:
    path = RESULTS / "floor_mechanism.json"
    if not path.exists():
        return "Not measured yet (`python -m bench.floor_mechanism`)."
    r: dict[str, Any] = json.loads(path.read_text())
    names = list(r["tables"])
    keys = list(r["tables"][names[0]]["mean"])
    out = [
        f"`python -m bench.floor_mechanism` ({r['when']}): {r['rows']:,}-row samples of the diamonds, "
        f"{r['seeds']} seeds, a stratified 80/20 split, {r['folds']} folds; test accuracy, the mean over the seeds "
        "(each seed's in bench/results/floor_mechanism.json).",
        "",
        "| variant | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for key in keys:
        out.append(f"| {key} | " + " | ".join(f"{r['tables'][n]['mean'][key]:.4f}" for n in names) + " |")
    rounds = {n: [round(float(sum(run[k]) / len(run[k]))) for run in r["tables"][n]["runs"] for k in run
                  if k.endswith("rounds") and k.startswith("GBM:")] for n in names}  # fmt: skip
    out += ["", "Rounds the GBM defaults' fold models keep (stopping on the log-loss), mean per seed: "
            + "; ".join(f"{n} {v}" for n, v in rounds.items()) + "."]  # fmt: skip
    return "\n".join(out)


def families_section() -> str:
    path = RESULTS / "family_compare_new.json"
    if not path.exists():
        return "Not measured yet (`python -m bench.family_compare --families ... --name family_compare_new`)."
    r: dict[str, Any] = json.loads(path.read_text())
    fams: list[str] = r["families"]
    out = [
        f"`python -m bench.family_compare --families {','.join(fams)} --name family_compare_new` ({r['when']}, 2 "
        f"CPUs, {r['folds']} folds, each family's default config alone in one `tabjob run` per table, no stack, no "
        "refit; test rows neither saw; higher is better, rmse negated; fit seconds are all folds').",
        "",
        "| dataset | rows | metric | "
        + " | ".join(fams)
        + " | default LightGBM | best | fit s ("
        + ", ".join(fams)
        + ") |",
        "|---|---|---|" + "---|" * (len(fams) + 3),
    ]
    wins = {k: 0 for k in fams}
    for name, t in r["tables"].items():
        scores = {k: t["families"][k]["score_test"] for k in fams}
        best = max((k for k in fams if scores[k] is not None), key=lambda k: scores[k])
        wins[best] += 1
        secs = ", ".join(f"{t['families'][k]['fit_seconds']:.0f}" for k in fams)
        out.append(
            f"| {name} | {t['rows']:,} | {t['metric']} | " + " | ".join(score_text(scores[k]) for k in fams)
            + f" | {score_text(t['default_lightgbm_test'])} | {best} | {secs} |"
        )  # fmt: skip
    out += ["", "Best test score per family: " + ", ".join(f"{k} **{v}**" for k, v in wins.items()) + "."]
    return "\n".join(out)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_section(MECHANISM_BEGIN, MECHANISM_END, mechanism_section())
        write_section(BEGIN, END, floor_section())
        write_section(HELDOUT_BEGIN, HELDOUT_END, heldout_section())
        write_section(FAMILIES_BEGIN, FAMILIES_END, families_section())
    else:
        print(mechanism_section(), "", floor_section(), "", heldout_section(), "", families_section(), sep="\n")
