"""Tables larger than one pod (docs/sharding.md): a pod's peak memory at 1, 2 and 3 ranks and two sizes, the memory
per row, the quality and throughput of sharded GBM and XGB against one process, and a table about 3x one pod's limit.

    python -m bench.sharded_memory            # root: each pod runs in a memory cgroup of its own (bench/pods.py)

Each configuration runs as the operator runs it: one torchrun agent per pod (``--nnodes=N``, one rank each), the
pods' rendezvous on this machine, each pod in its own memory cgroup, whose peak is read when it exits; each rank also
logs its process's peak (VmHWM). The tables are synthetic (``bench.common.synthetic``: float32 columns stored as
float64, a binary label), written to tmpfs as Parquet files of 50,000 rows in row groups of 25,000.
One fit per configuration (a 20% hashed holdout, no bagging) with a fixed number of rounds, so every run does the same
work. Results: bench/results/sharded_memory.json; BENCHMARKS.md: ``python -m bench.render_sharded --write``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import RESULTS, ROOT, synthetic
from bench.envelope import envelope, write
from bench.pods import cgroup, start_in
from tabjob.api import parse_manifest
from tabjob.planner import plan

WORK = Path("/dev/shm/tabjob-sharded")
FILE_ROWS, GROUP_ROWS = 50_000, 25_000
PEAK = re.compile(r"rank (\d+) peak memory: process ([\d.]+) MiB")
READ = re.compile(r"rank (\d+) read (?:(\d+) of \d+ rows|the whole table, (\d+) rows).* in ([\d.]+) s")


def load() -> float:
    return os.getloadavg()[0]


def table(rows: int, cols: int) -> Path:
    root = WORK / f"t{rows}x{cols}"
    if (root / "_done").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    frame = synthetic(rows, cols, seed=rows)
    frame[[c for c in frame.columns if c != "label"]] = frame.drop(columns="label").astype("float64")
    for i, start in enumerate(range(0, rows, FILE_ROWS)):
        part = pa.Table.from_pandas(frame.iloc[start : start + FILE_ROWS], preserve_index=False)
        pq.write_table(part, root / f"part-{i:05d}.parquet", row_group_size=GROUP_ROWS)
    (root / "_done").touch()
    return root


def manifest(train: Path, family: str, processes: int, rounds: int, memory: str | None = None) -> dict[str, Any]:
    config = {
        "processes": processes,
        "resources": {"cpus": processes},
        "hyperparameters": {"num_boost_round": rounds, "early_stopping_rounds": 0, "learning_rate": 0.1},
    }
    resources: dict[str, Any] = {"cpus": processes, "cpusPerPod": 1}
    if memory:
        resources["memory"] = memory
    return {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": f"bench-{family.lower()}-{processes}"},
        "spec": {
            "data": {"train": str(train), "label": "label", "evalMetric": "roc_auc"},
            "resources": resources,
            "models": {family: [config]},
            "ensemble": {"size": 0},
        },
    }


def big_manifest(train: Path, family: str, processes: int, rounds: int, limit_mib: int) -> dict[str, Any]:
    """The same three pods of ``limit_mib`` each, the config over 3 processes, or over 1 with three folds side by
    side (one a pod, each reading the whole table): the job a user with those pods would try first."""
    doc = manifest(train, family, processes, rounds, memory=f"{limit_mib * 3}Mi")
    doc["spec"]["resources"]["cpus"] = 3
    if processes == 1:
        doc["spec"]["bagging"] = {"folds": 3}
    return doc


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_pods(doc: dict[str, Any], work: Path, limit: int | None = None, timeout: float = 1800) -> dict[str, Any]:
    """The job as its pods, each in a cgroup of its own (with ``limit`` bytes, if given)."""
    job = parse_manifest(doc)
    p = plan(job.spec, job.metadata.name)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spec_path, plan_path = work / "spec.json", work / "plan.json"
    spec_path.write_text(json.dumps(doc))
    plan_path.write_text(p.to_json())
    env = {**os.environ, "PYTHONPATH": f"{ROOT}/operator:{ROOT}/trainer:{ROOT}", "PYTHONUNBUFFERED": "1"}
    port, pods = _port(), len(p.pods)
    started = time.perf_counter()
    result: dict[str, Any] = {"pods": []}
    groups = [cgroup(f"tabjob-bench-{i}", limit) for i in range(pods)]
    entered = [g.__enter__() for g in groups]
    try:
        procs = []
        for i, group in enumerate(entered):
            out = work / f"pod-{i}"
            out.mkdir()
            command = [
                sys.executable,
                "-m",
                "torch.distributed.run",
                f"--nnodes={pods}",
                "--nproc-per-node=1",
                f"--node-rank={i}",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint=127.0.0.1:{port}",
                "--rdzv-id=bench",
                f"--rdzv-conf=is_host={'1' if i == 0 else '0'}",
                "--max-restarts=0",
                "-m",
                "tabjob_trainer",
                "--spec",
                str(spec_path),
                "--plan",
                str(plan_path),
                "--output",
                str(out),
            ]
            procs.append(start_in(group, command, env, work / f"pod-{i}.log"))
        codes = [proc.wait(timeout=timeout) for proc in procs]
        for i, (group, code) in enumerate(zip(entered, codes, strict=True)):
            log = (work / f"pod-{i}.log").read_text(errors="replace")
            ranks = {int(r): float(m) for r, m in PEAK.findall(log)}
            read = [(int(a or b), float(t)) for _, a, b, t in READ.findall(log)]
            result["pods"].append(
                {
                    "exit": code,
                    "cgroup_peak_mib": group.peak() / 2**20,
                    "oom_kills": group.oom_killed(),
                    "rank_vmhwm_mib": ranks.get(i),
                    "read_rows": read[0][0] if read else None,
                    "read_s": read[0][1] if read else None,
                    "log_tail": log[-600:] if code else "",
                }
            )
    finally:
        for g in groups:
            g.__exit__(None, None, None)
    result["wall_s"] = time.perf_counter() - started
    records = sorted((work / "pod-0" / "fits").glob("*/result.json"))
    if records:
        rec = json.loads(records[0].read_text())
        result["fit"] = {
            k: rec.get(k) for k in ("scoreVal", "fitTime", "rowsTrain", "rowsVal", "rowsPerSecond", "bestIteration")
        }
        result["fit"]["rankRows"] = rec.get("extra", {}).get("rankRows")
    about = work / "pod-0" / "preprocessing.json"
    if about.exists():
        result["reading"] = json.loads(about.read_text())["data"].get("reading")
    return result


def one_process_same_rows(train: Path, family: str, rounds: int) -> dict[str, Any]:
    """The same configuration in one process on the same rows (the hashed holdout): score and rows per second."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}/operator:{ROOT}/trainer:{ROOT}", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "bench.sharded_alone", str(train), family, str(rounds)]
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def add_read_times(results: dict[str, Any]) -> list[str]:
    """Each pod's rows read and seconds reading, from its log, for results recorded before run_pods parsed them.

    A run's logs are overwritten by the next benchmark, so a log is used only where its peak line is the one the
    results recorded for that rank (the same run); the runs filled are returned."""
    filled = []
    for run in results["runs"]:
        if run["ranks"] < 1:
            continue
        name = f"{run['family']}-{run['rows']}-{run['ranks']}"
        logs = [WORK / "runs" / name / f"pod-{i}.log" for i in range(len(run["pods"]))]
        texts = [log.read_text(errors="replace") if log.exists() else "" for log in logs]
        peaks = [{int(r): float(m) for r, m in PEAK.findall(t)}.get(i) for i, t in enumerate(texts)]
        reads = [READ.findall(t) for t in texts]
        if peaks != [p["rank_vmhwm_mib"] for p in run["pods"]] or not all(reads):
            continue
        for pod, found in zip(run["pods"], reads, strict=True):
            _, a, b, t = found[0]
            pod["read_rows"], pod["read_s"] = int(a or b), float(t)
        filled.append(name)
    return filled


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="300000,600000")
    ap.add_argument("--cols", type=int, default=30)
    ap.add_argument("--ranks", default="1,2,3")
    ap.add_argument("--families", default="GBM,XGB")
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--big-rows", type=int, default=0, help="the 3x test: a table this long against --big-limit-mib")
    ap.add_argument("--big-limit-mib", type=int, default=0)
    ap.add_argument("--add-read-times", action="store_true", help="fill the recorded results' read times from logs")
    ap.add_argument("--big-only", action="store_true", help="run only the large-table case, into the recorded results")
    args = ap.parse_args(argv)
    if args.add_read_times:
        path = RESULTS / "sharded_memory.json"
        found = json.loads(path.read_text())
        print("read times from the logs of:", ", ".join(add_read_times(found)) or "none")
        path.write_text(json.dumps(found, indent=2) + "\n")
        return 0
    before = os.getloadavg()
    print(f"load average before: {before}", flush=True)
    sizes = [int(r) for r in args.rows.split(",")]
    ranks = [int(n) for n in args.ranks.split(",")]
    runs: list[dict[str, Any]] = []
    recorded: dict[str, Any] = json.loads((RESULTS / "sharded_memory.json").read_text()) if args.big_only else {}
    for family in [] if args.big_only else args.families.split(","):
        for rows in sizes:
            train = table(rows, args.cols)
            for n in ranks:
                print(f"{family} {rows} rows, {n} rank(s), load {load():.1f}", flush=True)
                r = run_pods(manifest(train, family, n, args.rounds), WORK / "runs" / f"{family}-{rows}-{n}")
                runs.append({"family": family, "rows": rows, "ranks": n, **r})
                print(json.dumps(runs[-1])[:400], flush=True)
        for rows in sizes:  # the same configuration in one process, read by the sharded reader
            alone = one_process_same_rows(table(rows, args.cols), family, args.rounds)
            runs.append({"family": family, "rows": rows, "ranks": 0, "one_process_same_rows": alone})
    big: dict[str, Any] = {}
    if args.big_rows and args.big_limit_mib:
        train = table(args.big_rows, args.cols)
        limit = args.big_limit_mib * 2**20
        for n in (3, 1):
            for family in args.families.split(","):
                doc = big_manifest(train, family, n, args.rounds, args.big_limit_mib)
                refused = _refusal(doc, train)
                r = {} if refused else run_pods(doc, WORK / "runs" / f"big-{family}-{n}", limit=limit)
                big[f"{family}-{n}"] = {"refused": refused, **r}
                print(family, n, json.dumps(big[f"{family}-{n}"])[:400], flush=True)
    after = os.getloadavg()
    table_bytes = {str(r): r * (args.cols + 1) * 8 for r in sizes + ([args.big_rows] if args.big_rows else [])}
    if args.big_only:  # the recorded runs stay as they were measured; the large case and its load are added
        recorded.update(big=big, big_limit_mib=args.big_limit_mib, big_rows=args.big_rows)
        recorded["table_bytes"][str(args.big_rows)] = table_bytes[str(args.big_rows)]
        recorded["big_load_average_before"] = [round(x, 2) for x in before]
        write("sharded_memory", recorded)
        print(f"load average after: {after}")
        return 0
    results = {
        "load_average_before": [round(x, 2) for x in before],
        "cols": args.cols,
        "table_bytes": table_bytes,
        "runs": runs,
        "big": big,
        "big_limit_mib": args.big_limit_mib,
        "big_rows": args.big_rows,
    }
    write("sharded_memory", envelope("sharded_memory", results, vars(args)))
    print(f"load average after: {after}")
    return 0


def _refusal(doc: dict[str, Any], train: Path) -> str | None:
    """`tabjob validate`'s verdict on the job with the table's footers: its refusal line, or None."""
    job = parse_manifest(doc)
    from tabjob.api.errors import SpecError
    from tabjob.cli.tablestats import table_stats

    stats, _ = table_stats(str(train))
    try:
        plan(job.spec, job.metadata.name, stats)
    except SpecError as exc:
        return exc.lines()[0]
    return None


if __name__ == "__main__":
    sys.exit(main())
