"""Render the Serving section of BENCHMARKS.md from bench/results/serving.json (``python -m bench.serving``).

``--write`` puts it into BENCHMARKS.md between its markers; without it, the section is printed.
"""

from __future__ import annotations

import json
from typing import Any

from bench.sections import RESULTS, render_main

BEGIN, END = "<!-- serving-section:begin (python -m bench.render_serving --write) -->", "<!-- serving-section:end -->"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _in_process(r: dict[str, Any]) -> list[str]:
    p = r["in_process"]
    return [
        f"**Load once, predict many** (in process): the run's best model ({p['model']}, {p['fits']} fits) predicting "
        f"a batch of {p['batch']:,} rows and a single row, loading every fit from disk on each call (as `tabjob "
        "predict` did) against a `Predictor` loaded once. Best of the alternating calls, the speed-up between "
        "bests (median in brackets). What loading once saves is the loading, a fixed cost per call, so it counts "
        "most for small batches; these fits are small.",
        "",
        "| | loading on every call (ms) | loaded once (ms) | speed-up |",
        "|---|---|---|---|",
        f"| {p['batch']:,} rows | {_ms(p['before_batch']['best_s'])} ({_ms(p['before_batch']['median_s'])}) | "
        f"{_ms(p['after_batch']['best_s'])} ({_ms(p['after_batch']['median_s'])}) | **{p['speedup_batch']:.2f}x** |",
        f"| 1 row | {_ms(p['before_row']['best_s'])} ({_ms(p['before_row']['median_s'])}) | "
        f"{_ms(p['after_row']['best_s'])} ({_ms(p['after_row']['median_s'])}) | **{p['speedup_row']:.2f}x** |",
        "",
    ]


def _served(r: dict[str, Any]) -> list[str]:
    s = r["served"]
    tab, peer = s["tabjob"], s["peer"]
    return [
        f"**Served over HTTP** (`tabjob serve`, MLServer {s['mlserver']}, JSON bodies, one client; rows/s from the "
        "best of the alternating calls): rows/s at batch "
        f"{r['in_process']['batch']:,} against in-process predict of the same rows in the same run, and single-row "
        f"latency ({s['row_requests']} sequential requests). The peer is what a user could serve without tabjob: "
        f"`mlserver-lightgbm` {s['mlserver']} on the run's best single LightGBM booster ({peer['booster']}, one fold "
        "of the bagged model, raw features; strings as their training codes).",
        "",
        "| | rows/s at batch 1,000 | vs in-process predict | single-row p50 (ms) | p90 (ms) | test score "
        f"({s['metric']}) |",
        "|---|---|---|---|---|---|",
        f"| in-process `Predictor` | {s['in_process_rows_per_s']:,.0f} | 1.00x | {_ms(s['in_process_row_p50_s'])} | "
        f"| {s['tabjob_score']:.4f} |",
        f"| `tabjob serve` ({s['model']}) | {tab['rows_per_s']:,.0f} | **{tab['ratio']:.2f}x** (goal >= 0.3x) | "
        f"**{_ms(tab['row_p50_s'])}** (goal <= 25) | {_ms(tab['row_p90_s'])} | {s['tabjob_score']:.4f} |",
        f"| peer: mlserver-lightgbm, one booster | {peer['rows_per_s']:,.0f} | {peer['ratio']:.2f}x | "
        f"{_ms(peer['row_p50_s'])} | {_ms(peer['row_p90_s'])} | {s['peer_score']:.4f} |",
        "",
        f"`tabjob serve` against the peer: **{tab['rows_per_s'] / peer['rows_per_s']:.2f}x** its rows/s at batch "
        f"1,000, **{tab['row_p50_s'] / peer['row_p50_s']:.2f}x** its single-row latency, and "
        f"{s['tabjob_score'] - s['peer_score']:+.4f} {s['metric']} on the {r['test_rows']} test rows.",
        "",
    ]


def render() -> str:
    path = RESULTS / "serving.json"
    if not path.exists():
        return "## Serving\n\nNo run recorded yet: `python -m bench.serving --served`.\n"
    r = json.loads(path.read_text())
    one, five, _ = r["load_average_1m_5m_15m"]
    out = [
        "## Serving",
        "",
        f"`bench/serving.py` ({r['when']}, {r['cpus']} cores, load average {one} (1 min) / {five} (5 min): the "
        "machine is shared, so the absolute figures move with other work and only the ratios, measured side by "
        f"side, carry over). Table: {r['table']} ({r['test_rows']} test rows, missing cells included).",
        "",
        *_in_process(r),
    ]
    if "served" in r:
        out += _served(r)
    return "\n".join(out)


if __name__ == "__main__":
    render_main(BEGIN, END, render)
