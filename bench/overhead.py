"""Overhead: one GBM fit through `tabjob run` against a plain lightgbm.train script, end to end.

Same 500k x 30 table (Parquet), same parameters, same 2 threads, same 80/20 stratified holdout with early
stopping on it. The plain script is what a person would write by hand; both are timed as fresh processes.
Goal: tabjob at most 1.15x the plain script.
"""

from __future__ import annotations

import subprocess
import sys
import time

from bench.common import job, save, synthetic_parquet, tabjob_run

ROWS, COLS, ROUNDS, THREADS = 500_000, 30, 300, 2

PLAIN = """
import sys, lightgbm as lgb, numpy as np, pyarrow.parquet as pq
from sklearn.model_selection import train_test_split
df = pq.read_table(sys.argv[1]).to_pandas()
y = df.pop("label").to_numpy()
tr, va = train_test_split(np.arange(len(y)), test_size=0.2, random_state=0, stratify=y)
x = df.to_numpy(dtype=np.float32)
params = dict(objective="binary", metric="binary_logloss", learning_rate=0.05, num_leaves=31, feature_fraction=0.9,
              min_data_in_leaf=20, num_threads=int(sys.argv[2]), seed=0, verbose=-1, deterministic=True)
dtr = lgb.Dataset(x[tr], y[tr]); dva = lgb.Dataset(x[va], y[va], reference=dtr)
b = lgb.train(params, dtr, num_boost_round=int(sys.argv[3]), valid_sets=[dva],
              callbacks=[lgb.early_stopping(50, verbose=False)])
p = b.predict(x[va], num_iteration=b.best_iteration)
print(b.current_iteration(), float(((p > 0.5) == y[va]).mean()))
"""


def main() -> None:
    data = synthetic_parquet(ROWS, COLS)
    work = data.parent
    script = work / "plain.py"
    script.write_text(PLAIN)
    doc = job(str(data), {"GBM": [{"hyperparameters": {"num_boost_round": ROUNDS}}]}, resources={"cpus": THREADS})
    plain, tab = [], []
    for _ in range(2):  # alternate, so drift in machine load hits both sides alike
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, str(script), str(data), str(THREADS), str(ROUNDS)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        plain.append(time.perf_counter() - started)
        wall, run_dir = tabjob_run(doc, work, "tabjob")
        tab.append(wall)
    from bench.common import records

    (rec,) = records(run_dir)
    save(
        "overhead",
        {
            "rows": ROWS,
            "cols": COLS,
            "threads": THREADS,
            "rounds_plain": int(out[0]),
            "rounds_tabjob": rec.best_iteration,
            "plain_seconds": plain,
            "tabjob_seconds": tab,
            "tabjob_fit_seconds": rec.fit_time,
            "ratio": min(tab) / min(plain),
            "accuracy_plain": float(out[1]),
            "accuracy_tabjob": rec.score_val,
        },
    )


if __name__ == "__main__":
    main()
