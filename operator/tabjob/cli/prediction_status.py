"""`tabjob status tp/NAME`: a TabularPrediction's rows scored of the total, its rate and ETA, each pod's share, the
shards that failed with their errors, and where the output is."""

from __future__ import annotations

from typing import Any


def print_prediction(tp: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    status = tp.get("status") or {}
    rate, eta = status.get("rowsPerSecond"), status.get("etaSeconds")
    console.print(
        f"[bold]{tp['metadata']['name']}[/]: {status.get('phase') or 'Pending'}  rows {status.get('progress') or '-'}"
        f"  shards {status.get('shardsDone', 0)}/{status.get('shardsTotal') or '?'}"
        + (f"  {rate:g} rows/s" if rate else "")
        + (f"  ETA {eta} s" if eta is not None else "")
        + f"  restarts {status.get('restarts', 0)}"
    )
    if status.get("message"):
        console.print(status["message"], markup=False)
    for label, key in (("model", "modelUri"), ("output", "outputUri")):
        if status.get(key):
            console.print(f"{label}: {status[key]}", markup=False)
    conds = Table(title="Conditions", title_justify="left")
    for col in ("type", "status", "reason", "message"):
        conds.add_column(col)
    for c in status.get("conditions") or []:
        conds.add_row(c["type"], c["status"], c.get("reason", ""), (c.get("message") or "")[:120])
    console.print(conds)
    if status.get("pods"):
        pods = Table(title="Pods", title_justify="left")
        for col in ("index", "pod", "state", "shards", "rows done", "rows scored", "s scoring"):
            pods.add_column(col)
        for p in status["pods"]:
            pods.add_row(
                str(p.get("index")), p.get("pod", ""), p.get("state", ""),
                f"{p.get('shardsDone', 0)}/{p.get('shardsTotal', 0)}", str(p.get("rowsDone", 0)),
                str(p.get("rowsScored", 0)), f"{p.get('secondsScoring', 0):g}",
            )  # fmt: skip
        console.print(pods)
    for f in status.get("failedShards") or []:
        console.print(f"failed: {f.get('error')}", markup=False)
