"""Render the Kueue section of BENCHMARKS.md from bench/results/kueue_peer.json (bench/kueue_peer.py) and
bench/results/kueue_queue.json (bench/kueue_queue.py).

python -m bench.render_kueue            # print the section
python -m bench.render_kueue --write    # replace it in BENCHMARKS.md, between its two markers
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.sections import RESULTS, replace_between, write_section

BEGIN = "<!-- kueue-section:begin (python -m bench.render_kueue --write) -->"
END = "<!-- kueue-section:end -->"
GOAL = 1.1  # TabularJob / Job, for admission (p50) and for preemption

INTRO = """\
`bench/kueue_peer.py` runs on `make cluster` (Kueue v0.17.0 installed by its Helm chart). Both kinds go through one
LocalQueue of a ClusterQueue the script makes (2 `nvidia.com/gpu` of quota, preemption of lower priorities), with
pods of the same shape: 2 pods of 1 CPU, 2Gi and 1 GPU each, the trainer image. The peer is an Indexed batch/v1 Job
through Kueue's batch/Job integration whose pods copy the TabularJob's pod spec (image, resources, volumes with a
copy of the plan ConfigMap, env, security context, grace period), keep one CPU busy as a training pod does, and exit
on SIGTERM as the trainer does. The volumes matter: the kubelet waits for a pod's volumes before it makes the
sandbox (about 0.3 s for the trainer's), which a volume-less peer would not. For preemption the low job of each
kind runs `--settle` seconds first, so it is preempted at work (the TabularJob trains until deleted). The operator
runs as `tabjob operator -n NS`, as deployed. Ratios are TabularJob / Job within one run; above 1, the TabularJob is
slower. Each apply first waits a random 0-1 s: the kubelet reports a started container at its next
once-a-second relist, and a loop paced by what it sees would start every apply at the same phase of that clock, where
a path 0.1 s longer loses a whole second every time (an earlier run without the wait: 2.08)."""


def _verdict(name: str, ratio: float) -> str:
    return f"- {name}: **{ratio:.2f}** (goal <= {GOAL}): " + (
        "met." if ratio <= GOAL else f"**missed** by {ratio - GOAL:.2f}."
    )


def render(results: Path = RESULTS) -> str:
    path = results / "kueue_peer.json"
    out = ["## Kueue", "", INTRO, ""]
    if not path.exists():
        return "\n".join([*out, "No run recorded yet: run `python -m bench.kueue_peer`.", ""])
    r: dict[str, Any] = json.loads(path.read_text())
    a = r["args"]
    load = r["load_average_1m_5m_15m"]
    out += [
        "```",
        f".venv/bin/python -m bench.kueue_peer --runs {a['runs']} --preemptions {a['preemptions']}"
        + (f" --settle {a['settle']:g}" if "settle" in a else ""),
        "```",
        "",
        f"Run {r['when']} at {r['commit']}; load average {r['load_average_at_start'][0]} at the start, "
        f"{load[0]} (1 min) / {load[1]} (5 min) at the end, {r['cpus']} cores.",
        "",
        "| measure | TabularJob | Indexed Job | ratio |",
        "|---|---|---|---|",
        f"| apply -> every pod Running, p50 ({a['runs']} each) | {r['tabjob_apply_to_running_p50_s']:.2f} s | "
        f"{r['job_apply_to_running_p50_s']:.2f} s | **{r['apply_to_running_p50_ratio']:.2f}** |",
        f"| same, p99 | {r['tabjob_apply_to_running_p99_s']:.2f} s | {r['job_apply_to_running_p99_s']:.2f} s | "
        f"{r['apply_to_running_p99_ratio']:.2f} |",
    ]
    if "preempt_to_running_p50_ratio" in r:
        out.append(
            f"| high-priority apply over a running low one -> its pods Running, p50 ({a['preemptions']} each) | "
            f"{r['tabjob_preempt_to_running_p50_s']:.2f} s | {r['job_preempt_to_running_p50_s']:.2f} s | "
            f"**{r['preempt_to_running_p50_ratio']:.2f}** |"
        )
    out += ["", _verdict("admission p50", r["apply_to_running_p50_ratio"])]
    if "preempt_to_running_p50_ratio" in r:
        out.append(_verdict("preemption p50", r["preempt_to_running_p50_ratio"]))
    return "\n".join([*out, "", *_queue(results), ""])


def _queue(results: Path) -> list[str]:
    path = results / "kueue_queue.json"
    if not path.exists():
        return ["**Jobs queued behind a small quota** (`bench/kueue_queue.py`): no run recorded yet."]
    q: dict[str, Any] = json.loads(path.read_text())
    a = q["args"]
    failed = f", failed: {', '.join(q['failed'])}" if q["failed"] else ""
    return [
        f"**{a['jobs']} jobs queued behind quota for {a['quota']} GPUs** (`bench/kueue_queue.py`, run {q['when']} at "
        f"{q['commit']}): one pod of 1 CPU and 1 GPU each (a small GBM), all applied to a held ClusterQueue, "
        "then the hold lifted.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| apply -> all {a['jobs']} waiting (pods made, Admitted False) | {q['apply_to_all_waiting_s']:.0f} s |",
        f"| operator API requests per queued job per minute, all waiting ({q['waiting_window_s']:.0f} s window) | "
        f"**{q['api_requests_per_queued_job_per_minute']:g}** ({q['waiting_api_requests']} requests) |",
        f"| hold lifted -> every job ended | {q['drain_s']:.0f} s ({q['jobs_per_minute']:g} jobs/min) |",
        f"| succeeded | **{q['succeeded']} of {a['jobs']}**{failed} |",
        f"| GPUs of admitted pods, sampled every second: peak / samples over quota | {q['gpu_peak']} of {a['quota']} / "
        f"**{q['samples_over_quota']}** of {q['gpu_samples']} |",
        f"| operator API requests per job while draining | {q['drain_api_requests_per_job']:g} |",
    ]


def replace_section(document: str, section: str) -> str:
    return replace_between(document, BEGIN, END, section)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--write", action="store_true", help="replace the section in BENCHMARKS.md")
    args = parser.parse_args(argv)
    section = render(args.results)
    if args.write:
        write_section(BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
