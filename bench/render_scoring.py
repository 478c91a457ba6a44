"""Render the Batch scoring section of BENCHMARKS.md from bench/results/scoring.json (``python -m bench.scoring``)
and bench/results/scoring_cluster.json (``python -m bench.scoring_cluster`` on the test bed).

``--write`` puts it into BENCHMARKS.md between its markers (appended the first time); without it, it is printed.
"""

from __future__ import annotations

import json
from typing import Any

from bench.common import RESULTS
from bench.sections import render_main

BEGIN = "<!-- scoring-section:begin (python -m bench.render_scoring --write) -->"
END = "<!-- scoring-section:end -->"
GOAL = 0.8  # tabjob score's rows/s / the in-process Predictor's


def _local() -> list[str]:
    path = RESULTS / "scoring.json"
    if not path.exists():
        return ["No figures on one machine yet: `python -m bench.scoring`.", ""]
    r: dict[str, Any] = json.loads(path.read_text())
    ratio = r["score_vs_in_process"]
    verdict = "met" if ratio >= GOAL else f"**missed** by {GOAL - ratio:.2f}"
    out = [
        f"`bench/scoring.py` ({r['when']}, {r['cpus']} cores, load average {r['load_average_before'][0]} (1 min) "
        f"before, {r['load_average_1m_5m_15m'][0]} after): a GBM model, {r['rows']:,} rows in "
        f"{r['args']['files']} Parquet part files on local disk; the best of three runs each.",
        "",
        "| scorer | rows/s | vs in-process |",
        "|---|---|---|",
        "| in-process `Predictor.predict_frame` on rows in memory (baseline) | "
        f"{r['in_process_rows_per_s']:,} | 1.00x |",
        f"| `tabjob score`'s path (one process, as one pod: read the parts, predict, write and commit part files) | "
        f"{r['tabjob_score_rows_per_s']:,} | {ratio:.2f}x |",
    ]
    if "ray_rows_per_s" in r:
        out.append(
            f"| peer: Ray Data {r.get('ray_version', '')} `map_batches` over the same `Predictor`, local mode "
            f"(read, predict, write Parquet) | {r['ray_rows_per_s']:,} | "
            f"{r['ray_rows_per_s'] / r['in_process_rows_per_s']:.2f}x |"
        )
    out += ["", f"`tabjob score` against the in-process `Predictor`: **{ratio:.2f}x** (goal >= {GOAL}x): {verdict}."]
    if "score_vs_ray" in r:
        out[-1] += f" Against Ray Data on the same rows: **{r['score_vs_ray']:.2f}x** its rows per second."
    out[-1] += (
        " The scoring path predicts one row group at a time while a thread reads the next, so reading overlaps "
        "predicting, and the Predictor's per-call work (the frame's conversion) runs on row groups that stay in "
        "cache: that is how it can pass one call over the whole frame in memory."
    )
    return [*out, ""]


def _cluster() -> list[str]:
    path = RESULTS / "scoring_cluster.json"
    if not path.exists():
        return ["No test-bed figures yet: `python -m bench.scoring_cluster` (after `make cluster`).", ""]
    r: dict[str, Any] = json.loads(path.read_text())
    scaling: list[dict[str, Any]] = r["scaling"]
    one = scaling[0]["rows_per_second"]
    out = [
        f"`bench/scoring_cluster.py` ({r['when']}, the test bed: three kubelets on this {r['cpus']}-core machine, "
        f"load average {r['load_average_before'][0]} (1 min) before; commit {r.get('commit', '?')}): a "
        "TabularPrediction of a GBM model trained into the bucket, timed from `kubectl apply` to the `_SUCCESS` "
        "object, each pod asking for 1 CPU. The share outside predicting is everything but the Predictor's own "
        "seconds (pod start, the model's download, reads and writes, the commit).",
        "",
        "| pods | rows | apply to `_SUCCESS` s | rows/s | vs 1 pod | share outside predicting |",
        "|---|---|---|---|---|---|",
    ]
    for s in scaling:
        out.append(
            f"| {s['parallelism']} | {s['rows']:,} | {s['apply_to_success_seconds']:.1f} | "
            f"{s['rows_per_second']:,.0f} | {s['rows_per_second'] / one:.2f}x | "
            f"{s['share_outside_predicting']:.0%} |"
        )
    large = r.get("large")
    if large:
        out += [
            "",
            f"**{large['rows']:,} rows** end to end with {large['parallelism']} pods: "
            f"**{large['apply_to_success_seconds']:.0f} s** from apply to `_SUCCESS` "
            f"({large['rows_per_second']:,.0f} rows/s), **{large['share_outside_predicting']:.0%}** of it outside "
            "predicting.",
        ]
    out += [
        "",
        "The three nodes share two cores, so a third pod adds no cores: the scaling figures say what the protocol "
        "costs (each pod's start, its model download and its commit), not what three machines would give.",
        "",
    ]
    return out


def render() -> str:
    return "\n".join(
        [
            "## Batch scoring",
            "",
            "Goal: `tabjob score` at least 0.8x the in-process `Predictor`'s rows per second (docs/scoring.md).",
            "",
            *_local(),
            *_cluster(),
        ]
    )


if __name__ == "__main__":
    render_main(BEGIN, END, render)
