"""Batch scoring throughput, in one run so the ratios share a machine: the in-process `Predictor` on rows already in
memory, `tabjob score`'s path (read the shards, predict, write and commit part files; one process, as one pod does)
on the same rows, and the peer: Ray Data's `map_batches` over the same `Predictor` (`pip install ray`, local mode).

    python -m bench.scoring [--rows 1000000] [--files 8]            # here: rows/s of each and the ratios

Runs only when the 1-minute load is under 2 (it prints it). The test bed's figures (scaling over pods, 10 million rows
from apply to _SUCCESS) are bench/scoring_cluster.py's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.envelope import envelope, write
from tests.trainer.helpers import manifest, mixed_table, write_manifest


def train(tmp: Path) -> Path:
    mixed_table(2000, seed=3).to_csv(tmp / "train.csv", index=False)
    job = write_manifest(tmp, manifest(str(tmp / "train.csv"), "label", {"GBM": [{"hyperparameters": {}}]}))
    code = "import sys; from tabjob.cli import main; sys.exit(main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", code, "run", str(job), "--output-dir", str(tmp / "run"), "--quiet"]
    subprocess.run(cmd, check=True)
    return tmp / "run"


def dataset(tmp: Path, rows: int, files: int) -> Path:
    out = tmp / "data"
    out.mkdir()
    per = rows // files
    for i in range(files):
        frame = mixed_table(per, seed=50 + i).drop(columns=["label"]).assign(id=np.arange(i * per, (i + 1) * per))
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), out / f"part-{i:05d}.parquet",
                       row_group_size=125_000)  # fmt: skip
    return out


def best_of(fn: object, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def local(args: argparse.Namespace) -> dict[str, object]:
    from tabjob_trainer.predictor import Predictor
    from tabjob_trainer.scoring.local import score
    from tabjob_trainer.scoring.preflight import Request

    tmp = Path(tempfile.mkdtemp(prefix="bench-scoring-"))
    run, data = train(tmp), dataset(tmp, args.rows, args.files)
    frame = pd.read_parquet(data)
    predictor = Predictor.load(run)
    n = len(frame)
    in_process = best_of(lambda: predictor.predict_frame(frame, "bench"))
    counter = iter(range(100))
    scoring = best_of(lambda: score(Request(str(run), str(data), str(tmp / f"out-{next(counter)}"), ("id",)),
                                    log=False))  # fmt: skip
    result: dict[str, object] = {
        "rows": n, "in_process_rows_per_s": round(n / in_process),
        "tabjob_score_rows_per_s": round(n / scoring), "score_vs_in_process": round(in_process / scoring, 3),
    }  # fmt: skip
    try:
        import ray
    except ImportError:
        result["ray"] = "not installed (pip install ray)"
        return result
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    result["ray_version"] = ray.__version__

    def ray_run() -> None:
        ds = ray.data.read_parquet(str(data))
        ds.map_batches(lambda b: predictor.predict_frame(b, "ray"), batch_format="pandas").write_parquet(
            str(tmp / f"ray-{time.monotonic_ns()}")
        )

    ray_s = best_of(ray_run)
    result.update(ray_rows_per_s=round(n / ray_s), score_vs_ray=round(ray_s / scoring, 3))
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--files", type=int, default=8)
    args = p.parse_args()
    before = [round(x, 2) for x in os.getloadavg()]
    print(f"load {before[0]:.2f}")
    if before[0] >= 2:
        raise SystemExit("the machine is busy (1-minute load >= 2): not measuring")
    result = local(args)
    write("scoring", envelope("scoring", {"load_average_before": before, **result}, vars(args)))


if __name__ == "__main__":
    main()
