"""What every benchmark writes around its figures, in one place: which benchmark, on how many cores, when, the
load average at the end (other work on the machine skews timings, and this says how much there was), and for the
cluster benchmarks the arguments and the commit. Kept free of heavy imports: the cluster benchmarks load it too.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def commit() -> str:
    done = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip()


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded: what a result records beside its timings."""
    return [round(x, 2) for x in os.getloadavg()]


def envelope(benchmark: str, results: dict[str, Any], args: dict[str, Any] | None = None) -> dict[str, Any]:
    head: dict[str, Any] = {
        "benchmark": benchmark,
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_average_1m_5m_15m": load_average(),
    }
    if args is not None:
        head |= {"args": args, "commit": commit()}
    return {**head, **results}


def write(name: str, doc: dict[str, Any], echo: bool = True) -> Path:
    """bench/results/NAME.json, and (``echo``) the same JSON on stdout."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    if echo:
        print(json.dumps(doc, indent=2))
    return path
