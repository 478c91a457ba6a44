"""``tabjob status NAME``: phase, conditions, progress and the leaderboard of a TabularJob."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tabjob.client import Client


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "status",
        help="show a TabularJob's phase, conditions and leaderboard (tp/NAME: a TabularPrediction's rows and shards)",
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--namespace", "-n", default=None)
    p.add_argument("--output", "-o", choices=["table", "json", "yaml"], default="table")
    p.set_defaults(func=run)


def print_status(job: dict[str, Any], queue_position: str | None = None) -> None:
    """`queue_position`: the line about the job's place in its LocalQueue (kueue_visibility.describe), if any."""
    from rich.console import Console
    from rich.table import Table

    if job.get("kind") == "TabularPrediction":
        from tabjob.cli.prediction_status import print_prediction

        print_prediction(job)
        return
    console = Console()
    status = job.get("status") or {}
    prog = status.get("progress") or {}
    console.print(
        f"[bold]{job['metadata']['name']}[/]: {status.get('phase') or 'Pending'}"
        f"  fits {prog.get('summary') or '-'}  restarts {status.get('restarts', 0)}"
        f"  GPUs {status.get('requestedGpus', 0)}"
    )
    if status.get("message"):
        console.print(status["message"], markup=False)
    if status.get("outputUri"):
        console.print(f"run: {status['outputUri']}  (tabjob predict|serve|report|export take it)", markup=False)
    if status.get("exportPath"):
        console.print(f"serving export: {status['exportPath']}", markup=False)
    queue = ((job.get("spec") or {}).get("scheduling") or {}).get("queueName")
    if queue:
        admitted: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Admitted"), {})
        console.print(
            f"Kueue LocalQueue {queue}: {admitted.get('reason') or 'not seen yet'}"
            f"  requeues {status.get('requeues', 0)}",
            markup=False,
        )
        if queue_position:
            console.print(queue_position, markup=False)
    conds = Table(title="Conditions", title_justify="left")
    for col in ("type", "status", "reason", "message"):
        conds.add_column(col)
    for c in status.get("conditions") or []:
        conds.add_row(c["type"], c["status"], c.get("reason", ""), (c.get("message") or "")[:120])
    console.print(conds)
    if status.get("models"):
        board = Table(
            title=f"Leaderboard ({status.get('evalMetric') or 'score'}, higher is better)", title_justify="left"
        )
        for col in ("model", "state", "score_val", "score_test", "fit s", "predict ms/1k rows", "GPUs", "device"):
            board.add_column(col)

        def num(v: Any) -> str:
            return f"{v:.4f}" if isinstance(v, int | float) else "-"

        for m in status["models"]:
            board.add_row(
                m["name"],
                m.get("state", ""),
                num(m.get("scoreVal")),
                num(m.get("scoreTest")),
                num(m.get("fitSeconds")),
                num(m.get("predictMsPer1000Rows")),
                str(m.get("gpus", "-")),
                m.get("device") or "-",
            )
        console.print(board)


def run(args: argparse.Namespace) -> int:
    from tabjob.client import Client

    client = Client(namespace=args.namespace)
    job = client.get(args.name)
    if args.output == "json":
        print(json.dumps(job, indent=2))
    elif args.output == "yaml":
        import yaml

        print(yaml.safe_dump(job, sort_keys=False), end="")
    else:
        print_status(job, queue_position(client, job))
    return 0


def waiting_in_queue(job: dict[str, Any]) -> str | None:
    """The LocalQueue of a job that has one and is not admitted nor finished; None otherwise."""
    queue = ((job.get("spec") or {}).get("scheduling") or {}).get("queueName")
    status = job.get("status") or {}
    if not queue or status.get("phase") in ("Succeeded", "Failed"):
        return None
    admitted: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Admitted"), {})
    return None if admitted.get("status") == "True" else str(queue)


def queue_position(client: Client, job: dict[str, Any]) -> str | None:
    """One line on the job's place in its LocalQueue, or on why Kueue's visibility API could not say."""
    from tabjob.client import VisibilityUnavailable
    from tabjob.client.kueue_visibility import describe, position

    queue = waiting_in_queue(job)
    if queue is None:
        return None
    meta = job["metadata"]
    try:
        summary = client.pending_workloads(queue, meta["namespace"])
    except VisibilityUnavailable as exc:
        return describe(queue, None, unavailable=str(exc))
    return describe(queue, position(summary, meta["name"], meta["namespace"]))
