"""How busy each rank was while the base models trained, over finished bench runs' event logs; no model trained.

A config's folds run concurrently, one slot per rank. Config by config, the next config started when every slot
was done, so three folds on two ranks put two folds on one rank and one on the other, the second rank waited through
much of every config, and under a time limit the three folds got unequal time (the slot of two split its share).
Since then configs of one shape run in rounds (tabjob/planner/rounds.py): two configs of three folds are dealt over
the two ranks as one, three fits on each, and waited on once. This reads each run's ``progress.jsonl`` (FitStarted
and FitEnded per rank; fits skipped before starting left out) and records, per table, the span from the job's start
to the last fit's end, each rank's busy share of it, the CPU-seconds left idle, and the fit time and out-of-fold
score of each fold of the configs named (TabM's by default, the family a time limit cuts shortest on CPUs):

    python -m bench.rank_busy [--runs DIR] [--configs TABM] [--name rank_busy]
    python -m bench.rank_busy --render [--write]   # BENCHMARKS.md's section from the recorded file

DIR defaults to the same-families runs' directory (/tmp/tabjob-bench/autogluon_peer/same/tabjob).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.common import records
from bench.envelope import RESULTS, envelope, write
from bench.sections import render_main, score_text
from tabjob.contracts.results import FitEvent, read_events
from tabjob_trainer.record import FitRecord

RUNS = Path("/tmp/tabjob-bench/autogluon_peer/same/tabjob")
BEGIN = "<!-- rank-busy:begin (python -m bench.rank_busy --render --write) -->"
END = "<!-- rank-busy:end -->"
NAME = "rank_busy"
AFTER = "rank_busy_rounds"  # the same runs' measure once configs ran in rounds


def busy(events: list[FitEvent]) -> dict[str, Any]:
    """Each rank's busy seconds between the job's start and the last fit's end (pure)."""
    started = next(e.t for e in events if e.event == "JobStarted")
    ranks = sorted({e.rank for e in events if e.event == "FitStarted"})
    open_fits: dict[tuple[int, str | None], float] = {}
    seconds = dict.fromkeys(ranks, 0.0)
    last = started
    for e in events:
        if e.event == "FitStarted":
            open_fits[(e.rank, e.fit)] = e.t
        elif e.event == "FitEnded" and (e.rank, e.fit) in open_fits:
            seconds[e.rank] += e.t - open_fits.pop((e.rank, e.fit))
            last = max(last, e.t)
    span = last - started
    return {
        "span_seconds": round(span, 1),
        "busy_share": {str(r): round(s / span, 3) if span > 0 else 0.0 for r, s in seconds.items()},
        "idle_cpu_seconds": round(len(ranks) * span - sum(seconds.values()), 1),
    }


def folds(fits: list[FitRecord], config: str) -> list[dict[str, Any]]:
    """The config's fold fits that trained: rank, fit seconds, out-of-fold and test scores, why it stopped."""
    return [
        {
            "fit": r.id,
            "rank": r.rank,
            "fit_seconds": round(r.fit_time, 1),
            "score_val": r.score_val,
            "score_test": r.score_test,
            "note": r.note or "",
        }
        for r in fits
        if r.model == config and r.state == "Succeeded"
    ]


def measure(runs: Path, configs: list[str]) -> dict[str, Any]:
    tables: dict[str, Any] = {}
    for out in sorted(runs.glob("*.out")):
        events = read_events(out)
        if events:
            fits = records(out)
            tables[out.name.removesuffix(".out")] = {**busy(events), "folds": {c: folds(fits, c) for c in configs}}
    return tables


def _summary(tables: dict[str, Any]) -> str:
    second = sorted(t["busy_share"].get("1", 0.0) for t in tables.values())
    first = min(t["busy_share"].get("0", 0.0) for t in tables.values())
    idle = sum(t["idle_cpu_seconds"] for t in tables.values())
    return (
        f"rank 1 busy {second[0]:.0%}-{second[-1]:.0%} of the span (median {second[len(second) // 2]:.0%}), "
        f"rank 0 {first:.0%} or more, {idle:,.0f} idle CPU-s in all on the {len(tables)} tables"
    )


def _tabm(t: dict[str, Any]) -> str:
    folds = t["folds"].get("TABM", [])
    return "; ".join(f"{f['rank']}, {f['fit_seconds']:.0f} s, {score_text(f['score_val'])}" for f in folds) or "-"


def render() -> str:
    r = json.loads((RESULTS / f"{NAME}.json").read_text())
    a = json.loads((RESULTS / f"{AFTER}.json").read_text())
    tables = r["tables"]
    out = [
        "### Ranks busy while the base models trained (same families, 3 folds on 2 ranks)",
        "",
        f"`python -m bench.rank_busy` ({r['when']}) over the event logs of the runs `{r['args']['of']}` (no model "
        "trained): the span from the job's start to its last fit's end, each rank's busy share of it, and the "
        "CPU-seconds left idle. Config by config, the next config's fits started when all its slots were done, and "
        "three folds on two ranks left one rank one fold.",
    ]
    rounds = a["tables"]
    out += [
        f"Then the same over `{a['args']['of']}` ({a['when']}), with configs in rounds (two configs of three folds "
        "dealt over the two ranks as one, three fits on each, one wait per round).",
        "",
        "| dataset | span s | rank 1 busy | idle CPU-s | in rounds: span s | rank 1 busy | idle CPU-s | "
        "TabM's folds in rounds: rank, fit s, out-of-fold score |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, t in tables.items():
        b = rounds.get(name)
        later = (
            f"{b['span_seconds']:.0f} | {b['busy_share'].get('1', 0):.0%} | {b['idle_cpu_seconds']:.0f} | {_tabm(b)}"
            if b
            else "- | - | - | -"
        )
        out.append(
            f"| {name} | {t['span_seconds']:.0f} | {t['busy_share'].get('1', 0):.0%} | {t['idle_cpu_seconds']:.0f} | "
            f"{later} |"
        )
    both = {name: rounds[name] for name in tables if name in rounds}
    return "\n".join(
        [
            *out,
            "",
            f"On the tables of both: config by config, {_summary({n: tables[n] for n in both})}; in rounds, "
            f"{_summary(both)}.",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--configs", default="TABM", help="comma-separated configs whose folds are recorded")
    parser.add_argument("--of", default="", help="the results files whose runs the directory holds (for the record)")
    parser.add_argument("--name", default=NAME)
    parser.add_argument("--render", action="store_true", help="render BENCHMARKS.md's section (--write puts it)")
    args, _ = parser.parse_known_args()
    if args.render:
        render_main(BEGIN, END, render)
        return
    tables = measure(args.runs, args.configs.split(","))
    given = {"runs": str(args.runs), "configs": args.configs, "of": args.of}
    write(args.name, envelope(args.name, {"tables": tables}, given))


if __name__ == "__main__":
    main()
