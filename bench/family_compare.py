"""Families side by side, each its default config, 3-fold bagged: NN_TORCH (the MLP) and TABM (TabM) by default,
or those ``--families`` names (the new RF, XT, KNN and REALMLP against GBM, NN_TORCH and TABM).

On the AutoGluon peer's tables (``bench/autogluon_peer.py`` writes them to /tmp/tabjob-bench/autogluon_peer/data,
a fixed seeded 75/25 split) except the three largest, where TabM on two CPUs takes minutes a fold. One
``tabjob run`` per table with both families and nothing else (no preset, no stack), so each row is the family's own
bagged model: its out-of-fold score, its test score on rows neither saw, and its fit time (all folds). The default
LightGBM (``bench/plain_lightgbm.py``) on the same rows is the floor. Run it on a quiet machine:

    python -m bench.family_compare     # ~8 min; then python -m bench.render_family_compare --write
    python -m bench.family_compare --families GBM,NN_TORCH,TABM,RF,XT,KNN,REALMLP --name family_compare_new
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

from bench.autogluon_peer import DATA, default_lightgbm, peer_tables
from bench.common import job, save, tabjob_run

WORK = Path("/tmp/tabjob-bench/family_compare")
FAMILIES = ("NN_TORCH", "TABM")
SKIPPED = ("diamonds_cut", "txhousing", "randhie_mdvis", "diamonds_price", "flights_late", "fertility_morekids")
# 8,000-20,000 rows: minutes per TabM fold on 2 CPUs


def run_table(name: str, meta: dict[str, Any], families: tuple[str, ...] = FAMILIES) -> dict[str, Any]:
    folder = DATA / name
    doc = job(str(folder / "train.csv"), {key: [{}] for key in families}, label=meta["label"],
              resources={"cpus": 2}, bagging={"folds": 3}, ensemble={"size": 25})  # fmt: skip
    doc["spec"]["stacking"] = {"levels": 0}
    doc["spec"]["data"].update(
        {"test": str(folder / "test.csv"), "problemType": meta["problem"], "evalMetric": meta["metric"]}
    )
    load_before = [round(x, 2) for x in os.getloadavg()]
    wall, out = tabjob_run(doc, WORK, name)
    rows = {r["model"]: r for r in json.loads((out / "leaderboard.json").read_text())}
    return {
        "rows": len(pd.read_csv(folder / "train.csv")),
        "metric": meta["metric"],
        "group": meta["group"],
        "wall_seconds": wall,
        "load_before": load_before,
        "default_lightgbm_test": default_lightgbm(folder, meta),
        "families": {
            key: {
                "state": rows[key]["state"],
                "score_val": rows[key]["score_val"],
                "score_test": rows[key]["score_test"],
                "fit_seconds": rows[key]["fit_time"],
            }
            for key in families
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated family keys")
    parser.add_argument("--name", default="family_compare", help="results file: bench/results/NAME.json")
    parser.add_argument("--only", default="", help="comma-separated table names (default: all but the largest)")
    args = parser.parse_args()
    families = tuple(args.families.split(","))
    metas = peer_tables()
    started = time.time()
    wanted = args.only.split(",") if args.only else [n for n in metas if n not in SKIPPED]
    tables = {}
    for name in wanted:
        tables[name] = run_table(name, metas[name], families)
        scores = ", ".join(f"{k} {v['score_test']}" for k, v in tables[name]["families"].items())
        print(f"{name}: {scores}, default LightGBM {tables[name]['default_lightgbm_test']}", flush=True)
        # After every table: a run cut short (a session's end) keeps what it measured.
        result = {"families": list(families), "folds": 3, "seconds": time.time() - started, "tables": tables}
        save(args.name, result, echo=name == wanted[-1])


if __name__ == "__main__":
    main()
