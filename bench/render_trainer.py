"""Render the trainer section of BENCHMARKS.md from bench/results/*.json (the figures of the latest runs)."""

from __future__ import annotations

import json
from typing import Any

from bench.common import RESULTS


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _load_note(r: dict[str, Any]) -> str:
    if "load_average_1m_5m_15m" not in r:
        return f"{r['when']}, {r['cpus']} cores"
    one, five, _ = r["load_average_1m_5m_15m"]
    return f"{r['when']}, {r['cpus']} cores, load average {one} (1 min) / {five} (5 min)"


def render() -> str:
    out = ["## Trainer", ""]
    o = _load("overhead")
    if o:
        out += [
            f"**Overhead** (`bench/overhead.py`, {_load_note(o)}): one GBM fit of {o['rows']:,} x {o['cols']} through "
            f"`tabjob run` against a plain `lightgbm.train` script, same parameters, {o['threads']} threads, "
            f"same holdout, both as fresh processes, best of {len(o['plain_seconds'])} alternating runs.",
            "",
            "| | seconds | rounds | holdout accuracy |",
            "|---|---|---|---|",
            f"| plain lightgbm.train | {min(o['plain_seconds']):.1f} | {o['rounds_plain']} | "
            f"{o['accuracy_plain']:.4f} |",
            f"| tabjob run | {min(o['tabjob_seconds']):.1f} | {o['rounds_tabjob']} | {o['accuracy_tabjob']:.4f} |",
            "",
            f"Ratio **{o['ratio']:.2f}x** (goal <= 1.15x).",
            "",
        ]
    f = _load("parallel_folds")
    if f:
        p, s1, s2 = f["parallel_2x1"], f["sequential_1thread"], f["sequential_2threads"]
        out += [
            f"**Parallel folds** (`bench/parallel_folds.py`, {_load_note(f)}): an {f['folds']}-fold bagged GBM "
            f"({f['rows']:,} x {f['cols']}, {f['rounds']} rounds) through `tabjob run`; training time from the first "
            "fit start to the last fit end, best of the alternating repeats.",
            "",
            "| variant | training s | sum of fit s | ranks | dispatch gap per fit (s) | all per-fit work besides "
            "training (s) |",
            "|---|---|---|---|---|---|",
        ]
        for name, r in (
            ("2 folds at a time (2 ranks x 1 thread)", p),
            ("one after another, 1 thread", s1),
            ("one after another, 2 threads", s2),
        ):
            around = r.get("per_fit_overhead_seconds", r.get("per_fit_overhead_seconds_last_repeat", 0.0))
            out.append(
                f"| {name} | {r['training_seconds']:.1f} | {r['sum_fit_seconds']:.1f} | {r['ranks']} | "
                f"{r['dispatch_overhead_seconds']:.3f} | {around:.3f} |"
            )
        out += [
            "",
            f"Speed-up **{f['speedup_vs_sequential_1thread']:.2f}x** against the same folds one after another with "
            f"the same per-fit resources, **{f['speedup_vs_sequential_2threads']:.2f}x** against one after another "
            "with both threads per fold (goal >= 1.6x); dispatch gap per fit (one fit's end to the next one's "
            f"start) **{max(p['dispatch_overhead_seconds'], s1['dispatch_overhead_seconds']):.3f} s** "
            "(goal < 0.2 s); the last column adds everything else tabjob does per fit (split, copying the fold, "
            "predicting its out-of-fold rows, saving and writing the fit).",
            "",
        ]
    d = _load("ddp")
    if d:
        one, two = d["one_process_2threads"], d["ddp_2ranks_gloo"]
        out += [
            f"**DDP** (`bench/ddp.py`, {_load_note(d)}): NN_TORCH on {d['rows']:,} x {d['cols']}, {d['epochs']} "
            f"epochs, batch {d['batch_size_per_rank']} per rank; samples/s = training rows x epochs / fit seconds.",
            "",
            "| variant | samples/s | fit s | validation score |",
            "|---|---|---|---|",
            f"| 1 process, 2 threads | {one['samples_per_second']:,.0f} | {one['fit_seconds']:.1f} | "
            f"{one['score_val']:.4f} |",
            f"| 2 ranks DDP over gloo, 1 thread each | {two['samples_per_second']:,.0f} | {two['fit_seconds']:.1f} | "
            f"{two['score_val']:.4f} |",
            *(
                [
                    f"| 1 process, 1 thread | {d['one_process_1thread']['samples_per_second']:,.0f} | "
                    f"{d['one_process_1thread']['fit_seconds']:.1f} | {d['one_process_1thread']['score_val']:.4f} |"
                ]
                if "one_process_1thread" in d
                else []
            ),
            "",
            f"Ratio DDP / one process with 2 threads: **{d['ratio']:.2f}x**.",
            "",
        ]
    i = _load("ingest")
    if i:
        pq, csv = i["parquet"], i["csv"]
        out += [
            f"**Ingest** (`bench/ingest.py`, {_load_note(i)}): reading the {i['rows']:,} x {i['cols']} table, "
            "best of alternating rounds.",
            "",
            "| | seconds | speed vs bare pyarrow |",
            "|---|---|---|",
            f"| Parquet: pyarrow.parquet.read_table | {pq['pyarrow_seconds']:.3f} | 1.00x |",
            f"| Parquet: tabjob read_table (to pandas) | {pq['tabjob_read_seconds']:.3f} | "
            f"**{pq['speed_ratio_read']:.2f}x** |",
            f"| Parquet: tabjob prepare (read, label, preprocessing) | {pq['tabjob_prepare_seconds']:.3f} | "
            f"{pq['speed_ratio_prepare']:.2f}x |",
            f"| CSV: pyarrow.csv.read_csv | {csv['pyarrow_seconds']:.3f} | 1.00x |",
            f"| CSV: tabjob read_table | {csv['tabjob_read_seconds']:.3f} | **{csv['speed_ratio_read']:.2f}x** |",
            "",
            "Goal: read at >= 0.8x the bare pyarrow read.",
            "",
        ]
    q = _load("quality")
    if q:
        out += [
            f"**Quality** (`bench/quality.py`, {_load_note(q)}): best model's test score (higher is better, errors "
            "negated) against LightGBM with default parameters on the same fixed 80/20 split; tabjob runs the "
            "quickstart's shape (GBM + NN_TORCH, 3 folds, weighted ensemble).",
            "",
            "| dataset | metric | tabjob best model | tabjob test | plain LightGBM test | not below |",
            "|---|---|---|---|---|---|",
        ]
        for name, r in q.items():
            if isinstance(r, dict) and "metric" in r:
                out.append(
                    f"| {name} | {r['metric']} | {r['best_model']} | {r['tabjob_test']:.4f} | "
                    f"{r['plain_lightgbm_test']:.4f} | {'yes' if r['not_below'] else 'NO'} |"
                )
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render())
