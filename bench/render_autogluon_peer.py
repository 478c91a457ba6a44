"""Render the AutoGluon peer section of BENCHMARKS.md from bench/results/autogluon_peer_<setting>_<group>.json.

python -m bench.render_autogluon_peer            # print the section
python -m bench.render_autogluon_peer --write    # put it between its markers in BENCHMARKS.md
"""

from __future__ import annotations

import json
import sys
from typing import Any

from bench import repeated_runs
from bench.autogluon_side import DATASETS, KEPT_APART
from bench.common import RESULTS
from bench.sections import score_text, write_section

BEGIN = "<!-- autogluon-section:begin (python -m bench.render_autogluon_peer --write) -->"
END = "<!-- autogluon-section:end -->"
RUNS = [
    ("autogluon_peer_same_main", "Same families, same folds, in AutoGluon's time"),
    ("autogluon_peer_same_holdout", "Held-out tables, same families"),
    ("autogluon_peer_best_main", "AutoGluon's best_quality against tabjob's best preset"),
    # With refitFull (the floor's fix), the new tables, and AutoGluon 1.5's newest CPU preset.
    ("autogluon_peer_same_refit", "Same families with the refit (refitFull on, as presets high and best now set it)"),
    ("autogluon_peer_v150_refit", "AutoGluon's best_quality_v150 against tabjob's best preset"),
    # The refit's guard deploying the bags only on a clear win, and the networks keeping their bags.
    ("autogluon_peer_same_guard", "Same families with the refit: bags only on a clear win, networks keep theirs"),
    ("autogluon_peer_same_fresh", "Fresh tables, same families: the held-out check of the refit and its guard"),
    # XGB's string columns of more than 32 levels as ordinal codes: only the tables with such a column change.
    ("autogluon_peer_same_xgb", "Same families, XGB's many-level columns as codes (the tables with such a column)"),
    # The trees' adaptive early stopping (AutoGluon's rule); AutoGluon's side trained again, its predictions kept.
    ("autogluon_peer_same_patience", "Same families with the trees' adaptive early stopping"),
    # Each config's even share of the time left until every family has had its first turn (time_share.py).
    ("autogluon_peer_same_share", "Same families, each config its share of the time until every family's first turn"),
    # Measured and not adopted: TabM in the first turn on CPUs (cpu_turns_late 0), the one change on f2ae612.
    ("autogluon_peer_same_tabm_early", "Same families, TabM in the first turn on CPUs (not adopted)"),
    # After the last family's first config, each config at most the time left over the number of families.
    ("autogluon_peer_same_turns", "Same families, one turn's worth after the turns"),
    # The two tables the runs since the guard's left out, both sides trained again at the same code.
    ("autogluon_peer_same_turns_rest", "Same families, one turn's worth after the turns: the two other tables"),
    # LightGBM's string columns of more than 32 levels as ordinal codes, GBM_Plain none: the tables with a string
    # column (the others train as they did).
    ("autogluon_peer_same_codes", "Same families, LightGBM's many-level columns as codes, the floor's config on codes"),
    # Three fresh tables, each with a string column of more than 32 levels: the held-out check of the rule above.
    ("autogluon_peer_same_wide", "Fresh tables with a many-level string column, same families: the held-out check"),
    # LightGBM's round cap 1,000 -> 10,000 (4ededb3), stopped after its first table and reverted: see the reading.
    ("autogluon_peer_same_rounds_wide", "LightGBM's rounds at 10,000, the first wide table (not adopted)"),
    # Each LightGBM fit keeps the way of splitting its string columns that scores best on its validation rows.
    ("autogluon_peer_same_compare", "Same families, LightGBM's fits comparing the ways of splitting string columns"),
    ("autogluon_peer_same_compare_wide", "Fresh tables with a many-level string column, LightGBM comparing ways"),
    # No fold gets less than its even share as its slot started, and LightGBM's rounds at 10,000 (b86ff40): its
    # first two tables, then stopped and the rounds reverted (see the reading).
    (
        "autogluon_peer_same_cap_wide",
        "LightGBM's rounds at 10,000 with each fold its share, two wide tables (not adopted)",
    ),
    # XGB's fits also train every string column as sets where one is over the limit, and keep the better way.
    (
        "autogluon_peer_same_xgbways",
        "Same families, XGB's fits comparing two ways (the tables with a column over 32 levels)",
    ),
    ("autogluon_peer_same_xgbways_wide", "Fresh tables with a many-level string column, XGB comparing ways too"),
    # The time after the base models sized from the run's fits, the refit's estimate from each fold's kept way.
    ("autogluon_peer_same_postbase", "Same families, the time kept after the base models sized from the run"),
    # A new, faster machine: the code before on two of those tables, and AutoGluon trained again on seven.
    ("autogluon_peer_same_before_here", "The code before the sized time, on the machine of the run above"),
    ("autogluon_peer_same_here", "Same families, AutoGluon trained again on the machine of the runs above"),
    # TabM's defaults moved to the authors' TabM-mini (k 32, each member its own shuffle, clipped, the paper's batch).
    ("autogluon_peer_same_tabm_mini", "Same families, TabM-mini as TabM's defaults"),
    ("autogluon_peer_same_fresh_here", "Fresh tables, same families, both sides on this machine: the held-out check"),
    # The time kept after the base models sized before TabM's first turn (post_base.sized_after), not after it.
    ("autogluon_peer_same_sized", "Same families, the time after the base models sized before TabM's turn"),
    ("autogluon_peer_same_sized_fresh", "Fresh tables, the time after the base models sized before TabM's turn"),
    ("autogluon_peer_same_allowance", "Same families, tabjob's allowance outside its limit as measured (6 s, not 9)"),
    ("autogluon_peer_same_allowance_fresh", "Fresh tables, tabjob's allowance outside its limit as measured"),
    ("autogluon_peer_same_unstacked", "Same families, neither side with a stack layer"),
    ("autogluon_peer_same_unstacked_fresh", "Fresh tables, neither side with a stack layer"),
    ("autogluon_peer_same_unstacked_again", "Same families, neither side with a stack layer, the same code run again"),
    # A classifier's weighted ensemble chosen on the log-loss whatever the eval metric, and deployed ahead of any one
    # model; then four classification tables none of the runs above used, AutoGluon trained on them here.
    ("autogluon_peer_same_logloss", "Same families, a classifier's ensemble chosen on the log-loss"),
    ("autogluon_peer_same_logloss_fresh", "Fresh tables, a classifier's ensemble chosen on the log-loss"),
    ("autogluon_peer_same_unseen", "Unseen tables, same families: the held-out check of the log-loss ensemble"),
    ("autogluon_peer_same_wider", "Four more unseen tables, same families: the held-out check widened"),
    # best_quality_v150 against best at the current code, both sides trained again on this machine (the last such
    # run, autogluon_peer_v150_refit, trained both on a machine about 2.5 times slower).
    ("autogluon_peer_v150_here", "AutoGluon's best_quality_v150 against tabjob's best, both trained on this machine"),
    # best_quality against best at the current code, both sides trained on this machine: the first run of the setting
    # since the refit and the log-loss ensemble (autogluon_peer_best_main, eight tables, a slower machine).
    ("autogluon_peer_best_here", "AutoGluon's best_quality against tabjob's best, both trained on this machine"),
    # Same families again at the current code (since the log-loss run: a network fit past its deadline stops after
    # the batch in hand, and the entries run again with LightGBM preloaded), and the eight unseen tables, where the
    # floor had missed by one test row; AutoGluon trained on those again, its predictions from then not kept.
    ("autogluon_peer_same_head", "Same families at the current code, the sixteen tables run again"),
    ("autogluon_peer_same_unseen_head", "Unseen tables, same families, at the current code"),
    ("autogluon_peer_same_wider_head", "Four more unseen tables, same families, at the current code"),
    # The same code again on the two tables that moved most, to see one run's noise.
    ("autogluon_peer_same_head_again", "Same families at the current code, digits and midwest_state run again"),
    # The same code once more on every table, the unseen ones included: one run's noise measured on all of them,
    # and the tables counted by the mean of their runs (bench/repeated_runs.py, after these sections).
    ("autogluon_peer_same_rerun", "Same families at the current code, the sixteen tables a second time"),
    ("autogluon_peer_same_unseen_rerun", "Unseen tables, same families, at the current code a second time"),
    ("autogluon_peer_same_wider_rerun", "Four more unseen tables, same families, at the current code a second time"),
    # Configs of one shape in rounds (planner/rounds.py): two configs of three folds dealt over two ranks as one.
    ("autogluon_peer_same_rounds", "Same families, configs of three folds in rounds over the two ranks"),
    ("autogluon_peer_same_unseen_rounds", "Unseen tables, same families, configs in rounds"),
    ("autogluon_peer_same_wider_rounds", "Four more unseen tables, same families, configs in rounds"),
    # torch's one-time start-up (trainer warmup.py) warmed beside the trees, not paid out of the first network's share.
    ("autogluon_peer_same_warm", "Same families, torch warmed before the first network's share"),
    ("autogluon_peer_same_unseen_warm", "Unseen tables, same families, torch warmed"),
    ("autogluon_peer_same_wider_warm", "Four more unseen tables, same families, torch warmed"),
    # The code before the warm-up on the machine of the warmed run, the tables with the shortest limits.
    (
        "autogluon_peer_same_unwarmed_here",
        "Same families, the code before the warm-up on the machine of the warmed run (seven small tables)",
    ),
    # The warmed code again: first the four tables behind or level with AutoGluon and the five with the shortest
    # limits above it, then the seven large ones, to see one run's noise on each; then the eight unseen tables.
    ("autogluon_peer_same_warm_again", "Same families, torch warmed, the sixteen tables run again"),
    ("autogluon_peer_same_unseen_warm_again", "Unseen tables, same families, torch warmed, run again"),
    ("autogluon_peer_same_wider_warm_again", "Four more unseen tables, same families, torch warmed, run again"),
    # TabM's first turn ahead of the MLP's second config (the planner's order in 1 commit, reverted in the next), on a
    # machine about 2.5 times slower than the one AutoGluon's same-families side was trained on: the code before on
    # the same machine is what it compares with (the large tables, where TabM runs to the base models' deadline).
    ("autogluon_peer_same_order", "Same families, the MLP's second config after TabM's first turn (not adopted)"),
    ("autogluon_peer_same_order_before", "Same families, the code before the MLP's second config moved, same machine"),
    ("autogluon_peer_same_unseen_order", "Unseen tables, same families, the MLP's second config after TabM's"),
    ("autogluon_peer_same_wider_order", "Four more unseen tables, same families, the MLP's second config after TabM's"),
    # Both sides trained on that slower machine, at main's code: the same-families count read where it was trained.
    ("autogluon_peer_same_slow", "Same families, both sides trained on the slower machine, at main's code"),
]
# A run that changed tabjob's side against the tables' earlier figures: (run, the earlier runs, newest last).
BEFORE = {
    "autogluon_peer_same_patience": ("autogluon_peer_same_guard", "autogluon_peer_same_xgb"),
    "autogluon_peer_same_share": ("autogluon_peer_same_patience",),
    "autogluon_peer_same_tabm_early": ("autogluon_peer_same_share",),
    "autogluon_peer_same_turns": ("autogluon_peer_same_share",),
    "autogluon_peer_same_turns_rest": ("autogluon_peer_same_guard",),
    "autogluon_peer_same_codes": ("autogluon_peer_same_turns",),
    "autogluon_peer_same_rounds_wide": ("autogluon_peer_same_wide",),
    "autogluon_peer_same_compare": ("autogluon_peer_same_codes",),
    "autogluon_peer_same_compare_wide": ("autogluon_peer_same_wide",),
    "autogluon_peer_same_cap_wide": ("autogluon_peer_same_compare_wide",),
    "autogluon_peer_same_xgbways": ("autogluon_peer_same_compare",),
    "autogluon_peer_same_xgbways_wide": ("autogluon_peer_same_compare_wide",),
    "autogluon_peer_same_here": ("autogluon_peer_same_postbase",),
    "autogluon_peer_same_tabm_mini": ("autogluon_peer_same_here",),
    "autogluon_peer_same_sized": ("autogluon_peer_same_tabm_mini",),
    "autogluon_peer_same_sized_fresh": ("autogluon_peer_same_fresh_here",),
    "autogluon_peer_same_allowance": ("autogluon_peer_same_sized",),
    "autogluon_peer_same_allowance_fresh": ("autogluon_peer_same_sized_fresh",),
    "autogluon_peer_same_unstacked": ("autogluon_peer_same_allowance",),
    "autogluon_peer_same_unstacked_fresh": ("autogluon_peer_same_allowance_fresh",),
    "autogluon_peer_same_unstacked_again": ("autogluon_peer_same_unstacked",),
    "autogluon_peer_same_logloss": ("autogluon_peer_same_unstacked", "autogluon_peer_same_unstacked_again"),
    "autogluon_peer_same_logloss_fresh": ("autogluon_peer_same_unstacked_fresh",),
    "autogluon_peer_v150_here": ("autogluon_peer_v150_refit",),
    "autogluon_peer_best_here": ("autogluon_peer_best_main",),
    "autogluon_peer_same_head": ("autogluon_peer_same_logloss",),
    "autogluon_peer_same_unseen_head": ("autogluon_peer_same_unseen",),
    "autogluon_peer_same_wider_head": ("autogluon_peer_same_wider",),
    "autogluon_peer_same_head_again": ("autogluon_peer_same_head",),
    "autogluon_peer_same_rerun": ("autogluon_peer_same_head",),
    "autogluon_peer_same_unseen_rerun": ("autogluon_peer_same_unseen_head",),
    "autogluon_peer_same_wider_rerun": ("autogluon_peer_same_wider_head",),
    "autogluon_peer_same_rounds": ("autogluon_peer_same_head", "autogluon_peer_same_rerun"),
    "autogluon_peer_same_unseen_rounds": ("autogluon_peer_same_unseen_head", "autogluon_peer_same_unseen_rerun"),
    "autogluon_peer_same_wider_rounds": ("autogluon_peer_same_wider_head", "autogluon_peer_same_wider_rerun"),
    "autogluon_peer_same_warm": ("autogluon_peer_same_rounds", "autogluon_peer_same_unwarmed_here"),
    "autogluon_peer_same_warm_again": ("autogluon_peer_same_warm",),
    "autogluon_peer_same_unseen_warm_again": ("autogluon_peer_same_unseen_warm",),
    "autogluon_peer_same_wider_warm_again": ("autogluon_peer_same_wider_warm",),
    "autogluon_peer_same_order": ("autogluon_peer_same_order_before",),
    # The order run equals main on the seven tables where the order does not act; the code before covers the nine.
    "autogluon_peer_same_slow": ("autogluon_peer_same_order", "autogluon_peer_same_order_before"),
    "autogluon_peer_same_unseen_order": ("autogluon_peer_same_unseen_warm_again",),
    "autogluon_peer_same_wider_order": ("autogluon_peer_same_wider_warm_again",),
    "autogluon_peer_same_unseen_warm": ("autogluon_peer_same_unseen_rounds",),
    "autogluon_peer_same_wider_warm": ("autogluon_peer_same_wider_rounds",),
    "autogluon_peer_same_postbase": (
        "autogluon_peer_same_turns",
        "autogluon_peer_same_turns_rest",
        "autogluon_peer_same_compare",
        "autogluon_peer_same_xgbways",
    ),
}


def _trained(side: dict[str, Any]) -> int:
    """Base models with a validation score (the ensembles left out): what finished inside the time limit."""
    return sum(
        1
        for row in side["leaderboard"]
        if not row["model"].startswith("WeightedEnsemble") and row["score_val"] is not None
    )


def _floor_gap(e: dict[str, Any]) -> str:
    """tabjob's gap over the default LightGBM and its verdict; runs recorded before it was bootstrapped have none."""
    g = e.get("floor_bootstrap")
    return "not recorded" if g is None else f"{g['mean']:+.4g} [{g['low']:+.4g}, {g['high']:+.4g}] {g['verdict']}"


def _floor_losses(rows: dict[str, Any]) -> str:
    recorded = [e["floor_bootstrap"]["verdict"] for e in rows.values() if "floor_bootstrap" in e]
    if not recorded:
        return ""
    return f" (significantly below it, by the paired bootstrap, on **{recorded.count('loss')} of {len(recorded)}**)"


def _table(r: dict[str, Any]) -> list[str]:
    rows = r["datasets"]
    out = [
        "| dataset | rows x cols | metric | tabjob test | AutoGluon test | default LightGBM | tabjob - AutoGluon "
        "[95% paired bootstrap] | verdict | tabjob - default LightGBM [95%] | tabjob wall s (limit) | AutoGluon "
        "wall s (fit) | models trained (tabjob / AutoGluon) | load before / between / after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for ds, e in rows.items():
        t, a, b = e["tabjob"], e["autogluon"], e["bootstrap"]
        floor = "" if e["not_below_default_lightgbm"] else " (**below**)"
        slow = "" if e["time_met"] else " (**slower**)"
        out.append(
            f"| {ds} | {e['rows']:,} x {e['columns']} | {e['metric']} | {score_text(t['test'])}{floor} | "
            f"{score_text(a['test'])} | "
            f"{score_text(e['default_lightgbm_test'])} | {b['mean']:+.4g} [{b['low']:+.4g}, {b['high']:+.4g}] | "
            f"{b['verdict']} | {_floor_gap(e)} | {t['wall_seconds']:.0f} ({t['time_limit_seconds']}){slow} | "
            f"{a['wall_seconds']:.0f} ({a['fit_seconds']:.0f}) | {_trained(t)} / {_trained(a)} | "
            f"{e['load_before'][0]} / {e['load_between'][0]} / {e['load_after'][0]} |"
        )
    n = len(rows)
    verdicts = [e["bootstrap"]["verdict"] for e in rows.values()]
    out += [
        "",
        f"Win / tie / loss (paired bootstrap, 95%): **{verdicts.count('win')} / {verdicts.count('tie')} / "
        f"{verdicts.count('loss')}** of {n}. Test score at or above AutoGluon's on "
        f"**{sum(1 for e in rows.values() if e['score_met'])} of {n}**; at or above a default LightGBM on "
        f"**{sum(1 for e in rows.values() if e['not_below_default_lightgbm'])} of {n}**{_floor_losses(rows)}; "
        "tabjob's whole run within "
        f"AutoGluon's whole run on **{sum(1 for e in rows.values() if e['time_met'])} of {n}**.{_machine(rows)}",
        "",
    ]
    return out


def _machine(rows: dict[str, Any]) -> str:
    """The machine the tables that recorded it ran on (bench/calibration.py), so that runs on machines of other
    speeds are not read side by side unawares."""
    seen = [e["machine"] for e in rows.values() if "machine" in e]
    if not seen:
        return ""
    cpus = ", ".join(sorted({f"{m['cpu']} ({m['cpus']} cores)" for m in seen}))
    fits = [m["calibration_seconds"] for m in seen]
    return (
        f" Machine ({len(seen)} of {len(rows)} tables recorded it): {cpus}; the calibration fit "
        f"(`bench/calibration.py`) took {min(fits):.2f}-{max(fits):.2f} s."
    )


def _has(entry: dict[str, Any], model: str) -> bool:
    """Whether tabjob's run trained ``model`` (its row has a validation score)."""
    return any(row["model"] == model and row["score_val"] is not None for row in entry["tabjob"]["leaderboard"])


def _before(name: str, r: dict[str, Any]) -> list[str]:
    """Each table's scores in this run beside the same setting's latest earlier run of it (the code before)."""
    if name not in BEFORE:
        return []
    earlier: dict[str, dict[str, Any]] = {}  # the later run's entry wins
    for run in BEFORE[name]:
        earlier.update(json.loads((RESULTS / f"{run}.json").read_text())["datasets"])
    yes = {True: "yes", False: "no"}
    out = [
        f"Against the code before (each table's latest run among {', '.join(f'`{b}`' for b in BEFORE[name])}):",
        "",
        "| dataset | tabjob before | tabjob now | AutoGluon then | AutoGluon now | tabjob at or above AutoGluon "
        "(before / now) | tabjob models (before / now) | TABM trained (before / now) | tabjob wall s (before / now) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for ds, e in r["datasets"].items():
        if ds not in earlier:
            continue
        b = earlier[ds]
        out.append(
            f"| {ds} | {score_text(b['tabjob']['test'])} | {score_text(e['tabjob']['test'])} | "
            f"{score_text(b['autogluon']['test'])} | {score_text(e['autogluon']['test'])} | "
            f"{yes[b['score_met']]} / {yes[e['score_met']]} | "
            f"{_trained(b['tabjob'])} / {_trained(e['tabjob'])} | {yes[_has(b, 'TABM')]} / {yes[_has(e, 'TABM')]} | "
            f"{b['tabjob']['wall_seconds']:.0f} / {e['tabjob']['wall_seconds']:.0f} |"
        )
    return [*out, ""]


def _given(r: dict[str, Any]) -> str:
    """The time tabjob was given against the reused AutoGluon run: the allowance this run recorded, or the one of
    the runs before it recorded any (9 s)."""
    allowance = r.get("tabjob_overhead_seconds")
    if allowance is None:
        return "the same time as then"
    levels = r.get("tabjob_stack_levels")
    stack = "" if levels is None else f", `stacking.levels: {levels}`"
    return f"AutoGluon's wall time then less {allowance} s{stack}"


def _group_sizes() -> dict[str, int]:
    """How many tables each group holds now (bench/autogluon_side.py's datasets); a run with fewer names them."""
    sizes = {group: len(names) for group, names in KEPT_APART.items()}
    sizes["main"] = len(DATASETS) - sum(sizes.values())
    return sizes | {"all": sizes["main"] + sizes["holdout"]}


GROUP_SIZES = _group_sizes()


def _only(r: dict[str, Any]) -> str:
    """The --only a run was given, where it left tables of its group out."""
    names = list(r["datasets"])
    return f" --only {','.join(names)}" if len(names) < GROUP_SIZES[r["group"]] else ""


def render() -> str:
    out = [
        "## AutoGluon peer",
        "",
        "`bench/autogluon_peer.py`: tabjob against AutoGluon in its own virtualenv (with CatBoost and XGBoost), 2 "
        "CPUs each, on tables that ship inside PyPI packages (scikit-learn, plotnine, statsmodels) with a fixed "
        "seeded 75/25 split. AutoGluon runs first with the time limit; tabjob (`preset: best`, no models listed; "
        "in the same-families setting 3 folds and, from the run with neither side stacked on, `stacking.levels: 0`, "
        "as AutoGluon's `num_stack_levels: 0` there) "
        "then gets AutoGluon's whole wall time less an allowance for its own start and results (9 s until the run "
        "with the measured allowance, 6 s from it on: each results file records it; from the held-out run on, "
        "never more than AutoGluon's own limit), so each tabjob run is a "
        "fresh `tabjob run` process inside the wall time of AutoGluon's fresh process (import, `fit()`, scoring). "
        "Each side's deployed model predicts the test rows neither saw; scores are higher-is-better (rmse "
        "negated); the gap is bootstrapped over those rows, paired (`bench/paired_bootstrap.py`, 2,000 draws): a "
        "win or a loss where its 95% interval excludes zero, else a tie. The default LightGBM is an "
        "`LGBMClassifier`/`LGBMRegressor` with its defaults on the same rows. Load averages (1 min) are printed "
        "for each run; nothing else ran on the machine.",
        "",
    ]
    for name, title in RUNS:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            out += [f"### {title}", "", f"Not measured yet (`--name {name}`).", ""]
            continue
        r: dict[str, Any] = json.loads(path.read_text())
        named = "" if name == f"autogluon_peer_{r['setting']}_{r['group']}" else f" --name {name}"
        reused = sorted({e["autogluon_from"] for e in r["datasets"].values() if "autogluon_from" in e})
        peer = f" --peer-from {','.join(reused)}" if reused else ""
        since = (
            f" AutoGluon's side is the run `{','.join(reused)}`'s (the same tables, split, limit and version; "
            f"tabjob given {_given(r)}), not trained again: this run changed tabjob's side alone."
            if reused
            else ""
        )
        out += [
            f"### {title}",
            "",
            f"`python -m bench.autogluon_peer --setting {r['setting']} --group {r['group']} --seconds "
            f"{r['time_limit_seconds']}{_only(r)}{named}{peer}` ({r['when']}, AutoGluon {r['autogluon']}, its time "
            f"limit {r['time_limit_seconds']} s, {len(r['datasets'])} tables).{since}",
            "",
            *_table(r),
            *_before(name, r),
        ]
    return "\n".join([*out, *repeated_runs.render()])


if __name__ == "__main__":
    section = render()
    if sys.argv[1:] == ["--write"]:
        write_section(BEGIN, END, section)
    else:
        print(section)
