"""Render the "Tables larger than one pod" section of BENCHMARKS.md from bench/results/sharded_memory.json
(``python -m bench.sharded_memory``). ``--write`` puts it between its markers (appended the first time)."""

from __future__ import annotations

import json
from typing import Any

from bench.common import RESULTS
from bench.sections import render_main

BEGIN = "<!-- sharded-section:begin (python -m bench.render_sharded --write) -->"
END = "<!-- sharded-section:end -->"
DOUBLING_GOAL = 0.45  # what doubling the table adds to a rank of a 3-rank fit, against one process
PER_ROW_GOAL = 2.0  # one process's peak growth per row, in multiples of the row's float64 size
QUALITY_GOAL = 0.005  # relative difference of the sharded score from one process's on the same rows
MIB = 2**20
# Ray's release test (release/air_tests/air_benchmarks/workloads/xgboost_benchmark.py, its 100G case): 10 workers of
# 12 CPUs, XGBoostTrainer's default 10 rounds, 100 GB of Parquet; Ray reports 99 s (XGB), 128 s (LightGBM).
RAY = {"bytes": 100e9, "columns": 42, "workers": 10, "cpus": 12, "rounds": 10, "xgb_s": 99, "gbm_s": 128}


def _runs(r: dict[str, Any], family: str) -> dict[tuple[int, int], dict[str, Any]]:
    return {(x["rows"], x["ranks"]): x for x in r["runs"] if x["family"] == family and x["ranks"] > 0}


def _pod_peak(run: dict[str, Any]) -> float:
    return max(p["cgroup_peak_mib"] for p in run["pods"])


def _rank_peak(run: dict[str, Any]) -> float:
    return max(p["rank_vmhwm_mib"] or 0.0 for p in run["pods"])


def _fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares (slope, intercept) through (x, y)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return slope, my - slope * mx


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _family(r: dict[str, Any], family: str, out: list[str]) -> dict[str, float]:
    runs = _runs(r, family)
    sizes = sorted({rows for rows, _ in runs})
    ranks = sorted({n for _, n in runs})
    table = {int(k): v / MIB for k, v in r["table_bytes"].items()}
    if out and out[-1]:
        out.append("")  # a heading after the previous family's closing lines needs its blank line
    out += [
        f"### {family}",
        "",
        "| rows | table as float64 | ranks | read | each pod's peak (cgroup) | each rank's peak (VmHWM) | fit s | "
        "rows x rounds / s per rank |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rows in sizes:
        for n in ranks:
            run = runs.get((rows, n))
            if run is None:
                continue
            pods = ", ".join(f"{p['cgroup_peak_mib']:,.0f}" for p in run["pods"])
            vm = ", ".join(f"{p['rank_vmhwm_mib']:,.0f}" for p in run["pods"] if p["rank_vmhwm_mib"])
            fit = run.get("fit") or {}
            per_rank = (fit.get("rowsPerSecond") or 0) / n
            reading = (run.get("reading") or "?").split(":")[0]
            out.append(
                f"| {rows:,} | {table[rows]:,.0f} MiB | {n} | {reading} | {pods} MiB | {vm} MiB | "
                f"{fit.get('fitTime', 0):.1f} | {per_rank:,.0f} |"
            )
    found: dict[str, float] = {}
    if len(sizes) >= 2 and 1 in ranks and 3 in ranks:
        small, large = sizes[0], sizes[-1]
        grown = table[large] - table[small]
        one = _pod_peak(runs[(large, 1)]) - _pod_peak(runs[(small, 1)])
        three = _pod_peak(runs[(large, 3)]) - _pod_peak(runs[(small, 3)])
        found |= {"one": one, "three": three, "ratio": three / one if one else float("nan"), "per_row": one / grown}
        out += [
            "",
            f"Doubling the table ({small:,} to {large:,} rows, +{grown:,.0f} MiB as float64) adds **{one:,.0f} MiB** "
            f"to one process and **{three:,.0f} MiB** to each pod of a 3-rank fit (the largest pod): "
            f"**{found['ratio']:.2f}x** (goal <= {DOUBLING_GOAL}x): {_verdict(found['ratio'] <= DOUBLING_GOAL)}. "
            f"One process's peak grows by **{found['per_row']:.2f}x** the table's float64 size per row "
            f"(goal <= {PER_ROW_GOAL}x; reading through pandas, one process grew about 3.5x): "
            f"{_verdict(found['per_row'] <= PER_ROW_GOAL)}.",
        ]
        sharded = [(table[rows] / n, _pod_peak(runs[(rows, n)])) for rows in sizes for n in ranks if n > 1]
        if len(sharded) >= 2:
            k, c = _fit_line(sharded)
            found |= {"k": k, "c": c}
            out.append(
                f"Read sharded, a pod's peak is about **{c:,.0f} MiB + {k:.2f} x table/N** (least squares over the "
                f"{len(sharded)} sharded runs; the constant is the launcher, torchrun's agent, the interpreter and the "
                "libraries with torch, which a sharded job's process group needs)."
            )
    return found


def _alone(r: dict[str, Any], family: str) -> dict[int, dict[str, Any]]:
    return {x["rows"]: x["one_process_same_rows"] for x in r["runs"] if x["family"] == family and x["ranks"] == 0}


def _quality(r: dict[str, Any], family: str) -> str:
    runs = _runs(r, family)
    small = min((rows for rows, _ in runs), default=0)
    alone = _alone(r, family).get(small)
    three = runs.get((small, 3))
    if alone is None or three is None or not three.get("fit"):
        return ""
    dist = three["fit"]["scoreVal"]
    rel = abs(dist - alone["score"]) / abs(alone["score"])
    one = runs.get((small, 1), {}).get("fit") or {}
    speed = (three["fit"]["rowsPerSecond"] / 3) / one["rowsPerSecond"] if one.get("rowsPerSecond") else float("nan")
    return (
        f"| {family} | {dist:.5f} | {alone['score']:.5f} | {rel:.3%} ({_verdict(rel <= QUALITY_GOAL)}) | "
        f"{three['fit']['rowsPerSecond'] / 3:,.0f} | {one.get('rowsPerSecond', 0):,.0f} | {speed:.2f}x |"
    )


def _read_pace(r: dict[str, Any], family: str) -> float | None:
    """Rows a rank read and encoded per second, sharded (the largest table, every rank of the widest run)."""
    runs = _runs(r, family)
    widest = max(((rows, n) for rows, n in runs if n > 1), default=None)
    if widest is None:
        return None
    paces = [p["read_rows"] / p["read_s"] for p in runs[widest]["pods"] if p.get("read_s")]
    return sum(paces) / len(paces) if paces else None


def _ray(r: dict[str, Any], found: dict[str, dict[str, float]]) -> list[str]:
    out = ["", "**On paper: Ray's 100 GB test on 10 nodes.**"]
    rows = RAY["bytes"] / (RAY["columns"] * 8)
    per_node = rows / RAY["workers"]
    scale = r["cols"] / RAY["columns"]  # the measured paces are per row of this table's columns
    for family, seconds in (("XGB", RAY["xgb_s"]), ("GBM", RAY["gbm_s"])):
        runs = _runs(r, family)
        one = next((x for (_, n), x in sorted(runs.items(), reverse=True) if n == 1 and x.get("fit")), None)
        read = _read_pace(r, family)
        if one is None or read is None:
            continue
        per_thread = one["fit"]["rowsPerSecond"] * scale  # rows x rounds per second on one thread
        train = per_node * RAY["rounds"] / (per_thread * RAY["cpus"])
        prepare = per_node / (read * scale)
        peak = found.get(family, {})
        memory = (peak.get("c", 0) + peak.get("k", 0) * per_node * RAY["columns"] * 8 / MIB) / 1024
        out.append(
            f"- {family}: {rows / 1e6:,.0f} M rows of {RAY['columns']} float64 columns, {per_node / 1e6:,.0f} M a "
            f"node: reading and encoding **{prepare:,.0f} s** (a rank's measured {read * scale:,.0f} rows/s, one "
            f"read stream a node), training **{train:,.0f} s** ({RAY['rounds']} rounds at the measured "
            f"{per_thread:,.0f} rows x rounds per thread-second, on {RAY['cpus']} threads), so about "
            f"**{prepare + train:,.0f} s** against Ray's {seconds} s; each pod's peak about {memory:,.0f} GiB."
        )
    out.append(
        "A lower bound on the training time and an upper one on the reading: the pace per thread is one thread's "
        "here (LightGBM and XGBoost gain less than linearly from 12, and the data-parallel learners exchange "
        "histograms every round), while the reading ran one stream a rank from tmpfs on a busy 2-core machine (a node "
        "reads its shards' files several at a time)."
    )
    return out


def _company(load_before: float) -> str:
    """What shared the machine, as far as the load before the run says (the run's own ranks load it after)."""
    if load_before < 1.5:
        return "nothing else ran beside it; its own ranks are the load after"
    return "other work shared the machine, which moves the timings, not the memory"


def render() -> str:
    path = RESULTS / "sharded_memory.json"
    if not path.exists():
        return "## Tables larger than one pod\n\nNo run recorded yet: `python -m bench.sharded_memory`.\n"
    r: dict[str, Any] = json.loads(path.read_text())
    families = sorted({x["family"] for x in r["runs"]})
    before, after = r["load_average_before"], r["load_average_1m_5m_15m"]
    out = [
        "## Tables larger than one pod",
        "",
        f"`bench/sharded_memory.py` ({r['when']}, {r['cpus']} cores, load average {before[0]} (1 min) before, "
        f"{after[0]} after; {_company(before[0])}): synthetic "
        f"Parquet tables of {r['cols']} float64 columns and a binary label, in files of 50,000 rows and row groups of "
        "25,000, on tmpfs. Each configuration runs as the operator runs it: one torchrun agent a pod, one rank each, "
        "each pod in a memory cgroup of its own (bench/pods.py), whose peak is read when the pod exits; each rank "
        "logs its process's peak (VmHWM, which counts the shared libraries' pages in every process). One fit of "
        f"{r['args']['rounds']} rounds on a hashed 20% holdout. One rank reads whole (one process, as today); two and "
        "three read sharded.",
        "",
    ]
    found = {f: _family(r, f, out) for f in families}
    before = RESULTS / "sharded_memory_pandas_whole.json"
    if before.exists():
        old: dict[str, Any] = json.loads(before.read_text())
        today = []
        for f in families:
            runs = _runs(old, f)
            sizes = sorted({rows for rows, n in runs if n == 1})
            if len(sizes) >= 2:
                grown = (int(old["table_bytes"][str(sizes[-1])]) - int(old["table_bytes"][str(sizes[0])])) / MIB
                slope = (_pod_peak(runs[(sizes[-1], 1)]) - _pod_peak(runs[(sizes[0], 1)])) / grown
                today.append(f"{f} {slope:.2f}x")
        if today:
            out += [
                "",
                "Before this change one process read the table through pandas (`bench/results/"
                f"sharded_memory_pandas_whole.json`, the same benchmark): its peak grew by {', '.join(today)} the "
                "table's float64 size per row.",
            ]
    out += [
        "",
        "Quality and throughput (the smaller table; the one-process score is the same configuration trained in one "
        "process on the same rows, `bench/sharded_alone.py`):",
        "",
        "| family | 3 ranks, sharded | one process, same rows | difference | rows x rounds / s per rank, 3 ranks | "
        "one process | per rank vs one process |",
        "|---|---|---|---|---|---|---|",
    ]
    out += [line for f in families if (line := _quality(r, f))]
    big = r.get("big") or {}
    if big:
        size = r["big_rows"] * (r["cols"] + 1) * 8 / 2**20
        out += [
            "",
            f"**A table larger than one pod** ({r['big_rows']:,} rows x {r['cols'] + 1} columns, {size:,.0f} MiB as "
            f"float64, {size / r['big_limit_mib']:.2f}x a pod's limit of {r['big_limit_mib']:,} MiB; three pods of "
            "that limit, each in a memory cgroup of that size). A table 3x a pod's limit cannot fit three such pods "
            "at this pace: each holds its third at about 1.8-2.0x as float64 beside about 810 MiB of interpreter, "
            "libraries and torch. Read whole, each rank would need the planner's figure in the refusal below:",
        ]
        for key, v in sorted(big.items()):
            if v.get("refused"):
                out.append(f"- {key}: refused at validate: {v['refused']}")
            else:
                pods = ", ".join(f"{p['cgroup_peak_mib']:,.0f}" for p in v.get("pods", []))
                states = {p["exit"] for p in v.get("pods", [])}
                out.append(f"- {key}: exit codes {sorted(states)}, each pod's peak {pods} MiB")
    out += _ray(r, found)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    render_main(BEGIN, END, lambda: render().rstrip("\n"))
