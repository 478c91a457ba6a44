"""TabM's three folds on two CPUs: dealt over the two ranks (one rank trains two folds one after the other, the other
one fold alone) against each fold trained data-parallel over both ranks in turn (``processes: 2``, DDP over gloo)
and against three ranks on the two CPUs (every fold its own process for the whole window, the OS sharing the CPUs).

The same-families runs show the first: on diamonds_price TabM's lone fold trains about twice as long as each of the
two that share a rank, and the bag is held back by those two. Data-parallel fits, or three processes, would give every
fold the same time. Every variant trains TabM's default config alone, three folds, no ensemble and no refit, under the
same time limit; per fold the seconds, epochs trained and best epoch, and the bag's out-of-fold and test scores:

    python -m bench.tabm_folds [--table diamonds_price] [--seconds 160] [--only dealt,concurrent]

The tables are bench.autogluon_peer's (its ``datasets`` step writes them).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from bench.autogluon_peer import DATA, WORK
from bench.common import job, records, tabjob_run
from bench.envelope import envelope, load_average, write

# variant -> (TabM's config, the job's CPUs): the machine has two CPUs in every variant.
VARIANTS: dict[str, tuple[dict[str, Any], int]] = {
    "dealt": ({}, 2),  # the planner's default: each fold one process, the folds dealt over the two ranks
    "data_parallel": ({"processes": 2, "resources": {"cpus": 2}}, 2),  # each fold over both ranks, one after another
    "concurrent": ({}, 3),  # three ranks on two CPUs: every fold the whole window, the OS sharing the CPUs
}


def run(table: str, seconds: int, variant: str) -> dict[str, Any]:
    folder = DATA / table
    meta = json.loads((folder / "meta.json").read_text())
    config, cpus = VARIANTS[variant]
    doc = job(str(folder / "train.csv"), {"TABM": [config]}, label=meta["label"], resources={"cpus": cpus},
              timeLimitSeconds=seconds, bagging={"folds": 3}, refitFull=False)  # fmt: skip
    doc["spec"]["data"].update(
        {"test": str(folder / "test.csv"), "problemType": meta["problem"], "evalMetric": meta["metric"]}
    )
    load = load_average()
    wall, out = tabjob_run(doc, WORK / "tabm_folds", f"{table}_{variant}")
    bag = json.loads((out / "leaderboard.json").read_text())[0]
    folds = [
        {
            "fold": r.fold,
            "ranks": r.ranks,
            "seconds": round(r.fit_time, 1),
            "epochs": len(r.curve.get("val") or []),
            "best_epoch": r.best_iteration,
            "score_val": r.score_val,
        }
        for r in records(out)
    ]
    return {"load_before": load, "wall_seconds": round(wall, 1), "score_val": bag["score_val"],
            "score_test": bag["score_test"], "folds": folds}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="diamonds_price")
    parser.add_argument("--seconds", type=int, default=160, help="the job's time limit (TabM's lone fold trained "
                        "about 160 s in the same-families run of diamonds_price)")  # fmt: skip
    parser.add_argument("--name", default="tabm_folds")
    parser.add_argument("--only", default="", help="comma-separated variants (default: all)")
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else list(VARIANTS)
    results = {variant: run(args.table, args.seconds, variant) for variant in chosen}
    for variant, r in results.items():
        epochs = [f["epochs"] for f in r["folds"]]
        print(f"{variant}: out of fold {r['score_val']:.4f}, test {r['score_test']:.4f}, epochs {epochs}", flush=True)
    given = {"table": args.table, "seconds": args.seconds, "only": args.only}
    write(args.name, envelope(args.name, {"table": args.table, "variants": results}, given), echo=False)


if __name__ == "__main__":
    main()
