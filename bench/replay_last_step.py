"""Rank 0's last step (stack layer, weighted ensemble, refit and its guard) run again over finished bench runs' fits.

What happens after the base models decides what is deployed, and a change to it (the ensemble's selection, the
guard's rule) needs no base model trained again: this copies each run directory of ``bench.autogluon_peer`` (its
fits, plan and spec), drops what the last step wrote, and calls the trainer's own ``write_results`` under the code at
hand, without a deadline (the refit is never cut short, so a table whose refit ran out of time in the run itself
can read differently). Two replays of two versions of the code are compared with each other, never with the run
they started from. Per table it records the test score of the deployed model, of the weighted ensemble of the bags
and of its refit, and of the mean of those two ensembles' predictions (a candidate that is not deployed), and the
guard's verdict as its note gives it:

    python -m bench.replay_last_step [--runs DIR] [--only A,B] [--name replay_last_step]

DIR defaults to the same-families runs' directory (/tmp/tabjob-bench/autogluon_peer/same/tabjob).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.envelope import envelope, write
from tabjob.contracts.plan import Plan
from tabjob_trainer import leaderboard, store
from tabjob_trainer.bagging import BaggedModel
from tabjob_trainer.dataset import Prepared, prepare
from tabjob_trainer.metrics import score

RUNS = Path("/tmp/tabjob-bench/autogluon_peer/same/tabjob")
WRITTEN = ("full", "oof", "leaderboard.*", "models.json", "metrics.json")  # what the last step writes


def replay(run: Path, manifest: Path, work: Path) -> dict[str, Any]:
    """One table: its run directory copied under ``work``, the last step run again, the test scores read."""
    d = yaml.safe_load(manifest.read_text())["spec"]["data"]
    out = work / run.name
    shutil.copytree(run, out, ignore=shutil.ignore_patterns(*WRITTEN))
    plan = Plan.from_json((out / "plan.json").read_text())
    data = prepare(d["train"], d["label"], d["problemType"], d.get("evalMetric", "auto"), d["test"])
    seen: dict[str, Any] = {}
    add_refits = leaderboard.add_refits

    def watched(
        out: Path,
        plan: Plan,
        data: Prepared,
        models: list[BaggedModel],
        ensemble: BaggedModel | None,
        deployed: str | None,
        deadline: float | None,
    ) -> list[BaggedModel]:  # the ensemble it was given and the refits it made
        refits = add_refits(out, plan, data, models, ensemble, deployed, deadline)
        seen["ensemble"], seen["refits"] = ensemble, refits
        return refits

    leaderboard.add_refits = watched
    try:
        summary = leaderboard.write_results(out, plan, data, store.records(out), 0.0, None)
    finally:
        leaderboard.add_refits = add_refits
    bag: BaggedModel | None = seen.get("ensemble")
    full = next((m for m in seen.get("refits") or [] if m.name == f"{leaderboard.ENSEMBLE}_FULL"), None)
    row: dict[str, Any] = {"deployed": summary.best_model, "test": summary.score_test}
    verdict = next((m.message for m in seen.get("refits") or [] if "guard" in m.message), None)
    if verdict is not None:
        row["guard"] = verdict[verdict.index("guard") :]  # the holdout's scores and what they deployed
    if bag is not None and bag.test_pred is not None:
        row["ensemble_test"] = _test(data, bag.test_pred)
        row["ensemble_weights"] = bag.extra["weights"]
        if full is not None and full.test_pred is not None:
            row["ensemble_full_test"] = _test(data, full.test_pred)
            row["mean_of_both_test"] = _test(data, (bag.test_pred + full.test_pred) / 2)
    return row


def _test(data: Prepared, pred: np.ndarray) -> float:
    assert data.y_test is not None
    return score(data.metric, data.label.problem_type, data.y_test, pred, data.n_classes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--only", default=None)
    parser.add_argument("--name", default="replay_last_step")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    tables: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tabjob-replay-") as work:
        for manifest in sorted(args.runs.glob("*.yaml")):
            run = args.runs / f"{manifest.stem}.out"
            if (only and manifest.stem not in only) or not (run / "leaderboard.json").exists():
                continue
            tables[manifest.stem] = replay(run, manifest, Path(work))
            print(manifest.stem, tables[manifest.stem], flush=True)
    given = {"runs": str(args.runs), "only": args.only}
    write(args.name, envelope(args.name, {"tables": tables}, given), echo=False)


if __name__ == "__main__":
    main()
