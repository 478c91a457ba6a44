"""The floor: tabjob's deployed model against a default LightGBM fit on all the training rows, bags against refits.

On the AutoGluon peer's tables (``bench/autogluon_peer.py`` writes them to /tmp/tabjob-bench/autogluon_peer/data, a
fixed seeded 75/25 split; the test rows are seen by nobody), one ``tabjob run`` per table in the same-families
shape (``preset: best``, 3 folds, the stack and the refit as the preset sets them, ``refitFull: true``) with a fixed
time limit. Its leaderboard holds both deployments a run can make: the bags' weighted ensemble (what tabjob
deployed before refitFull) and the refits (``*_FULL``), so each row of the table compares, on the same run:
the deployed model, the bags' ensemble, and the default ``LGBMClassifier``/``LGBMRegressor`` on all rows
(``bench/plain_lightgbm.py``), by the point score on the test rows and by the paired bootstrap. The bags' ensemble
had the refit's share of the budget (15%) less time than a run without refitFull would give it. Each table waits for
a quiet machine (1-minute load under 1.5, at most ``--wait`` seconds) and records the load.

    python -m bench.floor [--seconds 90] [--only NAME,NAME]    # then python -m bench.render_floor --write
    python -m bench.floor --groups fresh,unseen,wider,wide --name floor_heldout    # the tables kept apart
    python -m bench.floor --only NAME --merge    # one table again, the others' figures kept
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

from bench.autogluon_peer import DATA, default_lightgbm_kept, peer_tables, tabjob_manifest
from bench.autogluon_peer import WORK as PEER_WORK
from bench.common import save, tabjob_run
from bench.envelope import commit
from bench.paired_bootstrap import Gap, labelled_gap
from bench.sections import RESULTS
from tabjob_trainer.predictor import Predictor

WORK = Path("/tmp/tabjob-bench/floor")
QUIET = 1.5
COLUMNS = ("model", "score_val", "score_test", "predict_ms_per_1000_rows", "fit_time", "note")


def wait_for_quiet(limit: float) -> list[float]:
    """Wait (polling every 30 s, at most ``limit`` seconds) for a 1-minute load under QUIET; the load when it ran."""
    ends = time.time() + limit
    while os.getloadavg()[0] >= QUIET and time.time() < ends:
        time.sleep(30)
    return [round(x, 2) for x in os.getloadavg()]


def manifest(folder: Path, meta: dict[str, Any], seconds: int) -> dict[str, Any]:
    """The same-families run of bench/autogluon_peer.py (preset best, 3 folds) with the refit on."""
    doc = tabjob_manifest(folder, meta, seconds, "same")
    doc["spec"]["refitFull"] = True
    return doc


def _side(out: Path, test: pd.DataFrame, meta: dict[str, Any], model: str) -> pd.DataFrame:
    return Predictor.load(out, model).predict_frame(test.drop(columns=[meta["label"]]), "test.csv")


def _gap(meta: dict[str, Any], y: pd.Series, ours: pd.DataFrame, floor: pd.DataFrame, positive: str | None) -> Gap:
    proba = f"proba_{positive}"
    return labelled_gap(meta["problem"], meta["metric"], y, (ours["prediction"], ours.get(proba)),
                        (floor["pred"], floor.get("proba")), positive)  # fmt: skip


def run_table(name: str, meta: dict[str, Any], seconds: int, wait: float) -> dict[str, Any]:
    folder = DATA / name
    load_before = wait_for_quiet(wait)
    wall, out = tabjob_run(manifest(folder, meta, seconds), WORK, name)
    rows = json.loads((out / "leaderboard.json").read_text())
    by_name = {r["model"]: r for r in rows}
    test = pd.read_csv(folder / "test.csv")
    y = test[meta["label"]]
    positive = str(sorted(y.astype(str).unique())[-1]) if meta["problem"] == "binary" else None
    floor_test = default_lightgbm_kept(folder, meta, name, "floor", positive)
    floor = pd.read_csv(PEER_WORK / "floor" / "lightgbm" / f"{name}.preds.csv")
    entry: dict[str, Any] = {
        **meta,
        "seconds": seconds,
        "commit": commit(),
        "wall_seconds": wall,
        "load_before": load_before,
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "default_lightgbm_test": floor_test,
        "deployed": rows[0]["model"],
        "deployed_test": rows[0]["score_test"],
        "deployed_note": rows[0]["note"],
        "models_trained": sum(1 for r in rows if r["score_val"] is not None),
        "leaderboard": [{k: r.get(k) for k in COLUMNS} for r in rows],
    }
    for label, model in (("deployed", rows[0]["model"]), ("bags", "WeightedEnsemble")):
        if model in by_name and by_name[model]["score_val"] is not None:
            gap = _gap(meta, y, _side(out, test, meta, model), floor, positive)
            entry[f"{label}_gap"] = {"mean": gap.mean, "low": gap.low, "high": gap.high, "verdict": gap.verdict}
            entry[f"{label}_test"] = by_name[model]["score_test"]
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=90, help="tabjob's timeLimitSeconds per table")
    parser.add_argument("--only", default="", help="comma-separated table names (default: every table)")
    parser.add_argument("--wait", type=float, default=300, help="seconds to wait for a quiet machine per table")
    parser.add_argument(
        "--groups",
        default="",
        help="comma-separated held-out groups of the peer's tables (default: the benchmark's tables)",
    )
    parser.add_argument("--name", default="floor", help="results file: bench/results/NAME.json")
    parser.add_argument("--merge", action="store_true", help="keep the results file's other tables (with --only)")
    args = parser.parse_args()
    groups = [g for g in args.groups.split(",") if g]
    metas = {n: m for g in groups for n, m in peer_tables(g).items()} if groups else peer_tables()
    names = [n for n in metas if not args.only or n in args.only.split(",")]
    recorded = RESULTS / f"{args.name}.json"
    tables = json.loads(recorded.read_text())["tables"] if args.merge and recorded.exists() else {}
    for name in names:
        tables[name] = run_table(name, metas[name], args.seconds, args.wait)
        t = tables[name]
        print(f"{name}: deployed {t['deployed']} {t['deployed_test']:.4f}, bags {t.get('bags_test')}, default "
              f"LightGBM {t['default_lightgbm_test']:.4f}, load {t['load_before']}", flush=True)  # fmt: skip
        save(args.name, {"seconds": args.seconds, "folds": 3, "groups": groups, "tables": tables}, echo=False)


if __name__ == "__main__":
    main()
