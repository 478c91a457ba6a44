"""A run written to object storage (`spec.output.uri`): what the copy to the bucket costs beside the fitting.

The same job (GBM and XGB, 3 bagging folds, the MLServer export; a generated table of --rows rows) runs twice with
`tabjob run` on this machine, in alternating order: once into a local directory only, and once with
`spec.output.uri` on a SeaweedFS S3 server started here (hack/s3/seaweed.py). The trainer copies each finished fit in
the background while the next trains, and copies the rest and commits the run at the end; it logs the bytes it copied
and the seconds spent copying. Reported per side: the whole run's wall time, the fits' total seconds, and for the
bucket side the copy's bytes and seconds (in the background and at the end alike) and the run's extra wall time.

    python -m bench.s3_run [--rows 200000] [--rounds 2]
    python -m bench.render_storage --write
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.envelope import envelope, write
from bench.s3_read import load, wait_for_quiet
from hack.s3.seaweed import SeaweedS3
from tabjob.contracts.results import read_events
from tests.trainer.helpers import tabjob, write_manifest

COPIED = re.compile(r"committed (\d+) files to \S+ \(([\d.]+) MiB copied in ([\d.]+) s\)")


def table(rows: int, path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 20))
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(20)])
    frame["cat"] = rng.choice([f"c{i}" for i in range(50)], size=rows)
    frame["label"] = (x[:, 0] - 0.5 * x[:, 1] + rng.normal(scale=1.0, size=rows) > 0).astype(int)
    frame.to_parquet(path, index=False)


def manifest(train: Path, uri: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "data": {"train": str(train), "label": "label"},
        "resources": {"cpus": 2},
        "models": {"GBM": [{"hyperparameters": {"num_boost_round": 200}}], "XGB": [{}]},
        "bagging": {"folds": 3},
        "export": {"format": "mlserver"},
    }
    if uri:
        spec["output"] = {"uri": uri}
    return {"apiVersion": "tabjob.dev/v1alpha1", "kind": "TabularJob", "metadata": {"name": "s3run"}, "spec": spec}


def one(work: Path, train: Path, uri: str | None, name: str) -> dict[str, Any]:
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    job = write_manifest(work, manifest(train, uri))
    started = time.perf_counter()
    done = tabjob("run", str(job), "--output-dir", str(out), "--quiet", timeout=3600)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{name}: tabjob run failed: {done.stderr[-2000:]}")
    fit_seconds = sum(e.seconds or 0.0 for e in read_events(out) if e.event == "FitEnded")
    result: dict[str, Any] = {"wall_seconds": round(wall, 2), "fit_seconds": round(fit_seconds, 2)}
    if uri:
        found = COPIED.search((out / "trainer.log").read_text())
        if found is None:
            raise SystemExit(f"{name}: the trainer's log does not say what it copied")
        files, mib, seconds = found.groups()
        result |= {"files": int(files), "mib_copied": float(mib), "copy_seconds": float(seconds)}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--wait-minutes", type=float, default=20)
    parser.add_argument("--quiet-load", type=float, default=1.5)
    args = parser.parse_args(argv)
    before = wait_for_quiet(args.quiet_load, args.wait_minutes)
    work = Path(tempfile.mkdtemp(prefix="tabjob-s3run-"))
    server = SeaweedS3.start(work / "seaweedfs")
    try:
        server.make_bucket("runs")
        os.environ.update(server.client_env())
        train = work / "train.parquet"
        table(args.rows, train)
        sides: dict[str, list[dict[str, Any]]] = {"local": [], "bucket": []}
        for i in range(args.rounds):
            order = ["local", "bucket"] if i % 2 == 0 else ["bucket", "local"]
            for side in order:
                uri = f"s3://runs/round-{i}/" if side == "bucket" else None
                sides[side].append(one(work, train, uri, f"{side}-{i}"))
                print(side, sides[side][-1], flush=True)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    result = envelope(
        "s3_run",
        {"rows": args.rows, "rounds": args.rounds, "load_average_before": before, "load_after": load(), "runs": sides},
    )
    write("s3_run", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
