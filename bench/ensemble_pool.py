"""The weighted ensemble's candidate pool, narrowed, over finished bench runs' bags: does choosing among fewer
models on out-of-fold scores do better on the test rows than choosing among all of them?

Over each run directory of ``bench.autogluon_peer`` (its fits, plan and spec) this rebuilds the bags from the fits
with the trainer's own ``build_models`` and runs the trainer's own Caruana selection (``add_ensemble``, the plan's
ensemble size) over several pools: every bag that finished (what the trainer does), the best 3, 5 or 8 by their own
out-of-fold score, the portfolio's configs without the random ones, the best bag of each family, and the best bag
alone. Each pool's ensemble of the bags predicts the test rows; no refit, no model trained again. The counts are
against AutoGluon's and the default LightGBM's test scores in the results files named:

    python -m bench.ensemble_pool --results autogluon_peer_same_unstacked,autogluon_peer_same_unstacked_fresh

DIR (``--runs``) defaults to the same-families runs' directory (/tmp/tabjob-bench/autogluon_peer/same/tabjob), which
holds the latest run of each table: the results files named should be those runs'.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.envelope import RESULTS, envelope, write
from tabjob.contracts.plan import Plan
from tabjob_trainer import leaderboard, store
from tabjob_trainer.bagging import BaggedModel
from tabjob_trainer.dataset import Prepared, prepare
from tabjob_trainer.metrics import score

RUNS = Path("/tmp/tabjob-bench/autogluon_peer/same/tabjob")


def _oof(data: Prepared, m: BaggedModel) -> float:
    assert m.val_rows is not None and m.val_pred is not None
    return score(data.metric, data.label.problem_type, data.y[m.val_rows], m.val_pred, data.n_classes)


def pools(data: Prepared, bags: list[BaggedModel]) -> dict[str, list[BaggedModel]]:
    """The candidate pools, each a list of finished bags."""
    ranked = sorted(bags, key=lambda m: -_oof(data, m))
    best_of: dict[str, BaggedModel] = {}
    for m in ranked:
        best_of.setdefault(m.key, m)
    return {
        "all": bags,
        "top3": ranked[:3],
        "top5": ranked[:5],
        "top8": ranked[:8],
        "portfolio": [m for m in bags if "_rand" not in m.name],
        "best_per_family": list(best_of.values()),
        "best_alone": ranked[:1],
    }


def table(run: Path, manifest: Path) -> dict[str, float]:
    """Each pool's ensemble of the bags, scored on the table's test rows."""
    d = yaml.safe_load(manifest.read_text())["spec"]["data"]
    plan = Plan.from_json((run / "plan.json").read_text())
    data = prepare(d["train"], d["label"], d["problemType"], d.get("evalMetric", "auto"), d["test"])
    models = leaderboard.build_models(plan, data, run, store.records(run))
    bags = [m for m in models if m.state == "Succeeded" and m.val_pred is not None]
    scores = {}
    for name, pool in pools(data, bags).items():
        ensemble = leaderboard.add_ensemble(pool, data, plan.ensemble_size)
        assert ensemble is not None and ensemble.test_pred is not None and data.y_test is not None
        scores[name] = score(data.metric, data.label.problem_type, data.y_test, ensemble.test_pred, data.n_classes)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--results", required=True, help="comma-separated autogluon_peer results names")
    parser.add_argument("--name", default="ensemble_pool")
    args = parser.parse_args()
    peers: dict[str, Any] = {}
    for name in args.results.split(","):
        peers.update(json.loads((RESULTS / f"{name}.json").read_text())["datasets"])
    tables: dict[str, Any] = {}
    for name, peer in peers.items():
        scores = table(args.runs / f"{name}.out", args.runs / f"{name}.yaml")
        tables[name] = {
            "group": peer["group"],
            "pools": scores,
            "autogluon_test": peer["autogluon"]["test"],
            "default_lightgbm_test": peer["default_lightgbm_test"],
            "run_test": peer["tabjob"]["test"],
        }
        print(name, {k: round(v, 4) for k, v in scores.items()}, flush=True)
    counts = {
        pool: {
            "at_or_above_autogluon": int(sum(t["pools"][pool] >= t["autogluon_test"] - 1e-12 for t in tables.values())),
            "at_or_above_default_lightgbm": int(
                sum(t["pools"][pool] >= t["default_lightgbm_test"] - 1e-12 for t in tables.values())
            ),
            "mean_rank": float(
                np.mean([sorted(t["pools"].values(), reverse=True).index(t["pools"][pool]) for t in tables.values()])
            ),
        }
        for pool in next(iter(tables.values()))["pools"]
    }
    print(json.dumps(counts, indent=1))
    given = {"runs": str(args.runs), "results": args.results}
    write(args.name, envelope(args.name, {"tables": tables, "counts": counts}, given), echo=False)


if __name__ == "__main__":
    main()
