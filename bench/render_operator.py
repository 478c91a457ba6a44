"""Render the operator section of BENCHMARKS.md from bench/results/operator_scale*.json (bench/operator_scale.py).

    python -m bench.render_operator            # print the section
    python -m bench.render_operator --write    # replace it in BENCHMARKS.md, between its two markers

Runs shown side by side: `operator_scale_before.json` (the operator before the memory and throughput work),
`operator_scale.json` (after it), and `operator_scale_loaded.json` (the same code while other heavy work ran beside
it), and `operator_memory.json` (a memory-only run to 5,000 jobs, `--latency-jobs 0 --burst-jobs 0`) where present.
Each goal is judged on the `operator_scale.json` run, and again on the loaded one; the memory growth goal on the
memory run when there is one.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.sections import RESULTS, replace_between, write_section

BEGIN = "<!-- operator-section:begin (python -m bench.render_operator --write) -->"
END = "<!-- operator-section:end -->"
RUNS = (
    ("operator_scale_before", "before"),
    ("operator_scale", "after"),
    ("operator_scale_loaded", "under load"),
    ("operator_memory", "memory to 5,000 jobs"),
)
CPU = "tabjob_burst_operator_cpu_ms_per_job"
GOAL_LATENCY, GOAL_BURST, GOAL_RSS, GOAL_GROWTH = 1.0, 2.0, 150.0, 15.0

INTRO = """\
`bench/operator_scale.py` runs against `make cluster` with the CRD installed; the operator runs as a `tabjob operator`
subprocess exactly as deployed; pods are pinned to a node label no node has, so they stay Pending and the figures are
the controllers', not the trainer's. The peer is the same control plane's Job controller: an Indexed Job of the same
pod count, created the same way (`kubectl apply` one at a time for latency, 16 parallel clients for the burst), timed
by the same pod watch. Ratios are tabjob / Job within one run. The resident set is the operator process's VmRSS,
read 10 s after the last job of a step has its pod."""


def load(results: Path = RESULTS) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name, label in RUNS:
        path = results / f"{name}.json"
        if path.exists():
            found.append((label, {**json.loads(path.read_text()), "file": name}))
    return found


def _load_avg(r: dict[str, Any]) -> str:
    start = r.get("load_average_at_start", ["?"])[0]
    one, five, _ = r["load_average_1m_5m_15m"]
    return f"{start} at start, {one} (1 min) / {five} (5 min) at the end"


def _command(name: str, r: dict[str, Any]) -> str:
    a = r["args"]
    flags = (
        f"--latency-jobs {a['latency_jobs']} --burst-jobs {a['burst_jobs']} --total-jobs {a['total_jobs']} "
        f"--more-jobs {a['more_jobs']}"
    )
    if a.get("step", 1000) != 1000:
        flags += f" --step {a['step']}"
    for kv in a.get("operator_env") or []:
        flags += f" --operator-env {kv}"
    return f"nice -n 5 .venv/bin/python -m bench.operator_scale {flags} --save {name}"


def _growth_steps(r: dict[str, Any]) -> str:
    """The resident set at each step, with the growth per job since the step before."""
    points = r.get("rss_by_jobs") or []
    out = []
    for i, (jobs, rss) in enumerate(points):
        if i == 0:
            out.append(f"{jobs:,}: {rss:.0f}")
        else:
            prev_jobs, prev_rss = points[i - 1]
            out.append(f"{jobs:,}: {rss:.0f} (+{(rss - prev_rss) * 1024 / (jobs - prev_jobs):.1f} KiB/job)")
    return ", ".join(out)


def _by_call(r: dict[str, Any]) -> str:
    calls = r.get("api_requests_by_call")
    if not calls:
        return "-"
    quote = '"'
    return ", ".join(f"{k.replace(quote, '')}: {v:,}" for k, v in sorted(calls.items()))


def _rows(r: dict[str, Any]) -> dict[str, str]:
    jobs = r.get("jobs_after_more") or r["jobs"]
    rows: dict[str, str] = {}
    if "apply_to_pods_p50_ratio" in r:  # a memory-only run measures no latency and no burst
        rows["apply -> all pods created, p50, tabjob / Job (2 pods)"] = (
            f"{r['tabjob_apply_to_pods_p50_s']:.3f} s / {r['job_apply_to_pods_p50_s']:.3f} s = "
            f"**{r['apply_to_pods_p50_ratio']:.2f}**"
        )
        rows["same, p99, tabjob / Job"] = (
            f"{r['tabjob_apply_to_pods_p99_s']:.3f} s / {r['job_apply_to_pods_p99_s']:.3f} s"
        )
    if "burst_ratio" in r:
        rows[f"{r['burst_jobs']} one-pod jobs at once -> every pod created, tabjob / Job"] = (
            f"{r['tabjob_burst_objects_per_second']:.1f} / {r['job_burst_objects_per_second']:.1f} objects/s = "
            f"**{r['burst_ratio']:.2f}**"
        )
        rows["operator CPU per job in that burst"] = f"{cpu:.1f} ms" if (cpu := r.get(CPU)) is not None else "-"
    rows.update(
        {
            f"operator resident memory idle / with {r['jobs']:,} jobs": (
                f"{r['rss_idle_mib']:.0f} / **{r['rss_mib']:.0f} MiB**"
            ),
            "growth per job over the added jobs": (
                f"**{r['rss_growth_kib_per_job']:.1f} KiB** ({r['jobs']:,} -> {jobs:,})"
                if "rss_growth_kib_per_job" in r
                else "-"
            ),
            "resident set (MiB) by jobs": _growth_steps(r) or "-",
            "operator API requests per job": f"{r['api_requests'] / jobs:.1f}",
            "operator API requests by verb and answer": _by_call(r),
            "load average (2 cores)": _load_avg(r),
        }
    )
    return rows


def _verdicts(r: dict[str, Any]) -> list[str]:
    out = []
    if "apply_to_pods_p50_ratio" in r:
        ratio = r["apply_to_pods_p50_ratio"]
        out.append(
            f"- apply -> all pods created, p50: **{ratio:.2f}** (goal <= {GOAL_LATENCY:.1f}): "
            + ("met." if ratio <= GOAL_LATENCY else f"**missed** by {ratio - GOAL_LATENCY:.2f}.")
        )
    if "burst_ratio" in r:
        burst = r["burst_ratio"]
        out.append(
            f"- burst of {r['burst_jobs']} one-pod jobs: **{burst:.2f}x** the Job controller's objects/s (goal >= "
            f"{GOAL_BURST:.0f}x): " + ("met." if burst >= GOAL_BURST else f"**missed** by {GOAL_BURST - burst:.2f}x.")
        )
    rss = r["rss_mib"]
    out.append(
        f"- resident memory with {r['jobs']:,} jobs: **{rss:.0f} MiB** (goal <= {GOAL_RSS:.0f} MiB with 1,000): "
        + ("met." if rss <= GOAL_RSS else f"**missed** by {rss - GOAL_RSS:.0f} MiB.")
    )
    if "rss_growth_kib_per_job" in r:
        growth = r["rss_growth_kib_per_job"]
        out.append(
            f"- growth per job from {r['jobs']:,} to {r['jobs_after_more']:,} jobs: **{growth:.1f} KiB** (goal <= "
            f"{GOAL_GROWTH:.0f} KiB up to 5,000 jobs): "
            + ("met" if growth <= GOAL_GROWTH else f"**missed** by {growth - GOAL_GROWTH:.1f} KiB")
            + ("." if r["jobs_after_more"] >= 5000 else f" (measured to {r['jobs_after_more']:,} jobs, not 5,000).")
        )
    return out


def render(results: Path = RESULTS) -> str:
    runs = load(results)
    out = ["## Operator", "", INTRO, ""]
    if not runs:
        return "\n".join([*out, "No run recorded yet: run `bench/operator_scale.py`.", ""])
    out.append("```")
    out += [_command(r["file"], r) for _, r in runs]
    out += ["```", ""]
    heads = [f"{label} ({r['when']}{', ' + r['commit'] if r.get('commit') else ''})" for label, r in runs]
    out += ["| measure | " + " | ".join(heads) + " |", "|---" * (len(runs) + 1) + "|"]
    table = [_rows(r) for _, r in runs]
    for measure in dict.fromkeys(k for t in table for k in t):
        out.append(f"| {measure} | " + " | ".join(t.get(measure, "-") for t in table) + " |")
    label, judged = next((lr for lr in runs if lr[0] == "after"), runs[-1])
    out += ["", f"Goals, judged on the {label} run:", "", *_verdicts(judged)]
    loaded = next((r for label, r in runs if label == "under load"), None)
    if loaded is not None and judged is not loaded:
        out += ["", f"The same goals on the run under load ({loaded['when']}):", "", *_verdicts(loaded)]
    memory = next((r for label, r in runs if label == "memory to 5,000 jobs"), None)
    if memory is not None and judged is not memory:
        out += ["", f"Memory, judged on the memory-only run ({memory['when']}):", "", *_verdicts(memory)]
    return "\n".join([*out, ""])


def replace_section(document: str, section: str) -> str:
    return replace_between(document, BEGIN, END, section)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--write", action="store_true", help="replace the section in BENCHMARKS.md")
    args = parser.parse_args(argv)
    section = render(args.results)
    if args.write:
        write_section(BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
