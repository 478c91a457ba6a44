"""``tabjob plan FILE [--output table|json]``: what runs where and with which hyperparameters, at a glance or as the
contract JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from tabjob.api import TabularJob, load_manifest
from tabjob.cli.tablestats import table_stats
from tabjob.cli.validate import memory_line
from tabjob.contracts.plan import FitPlan, Plan
from tabjob.planner import plan_job
from tabjob.planner.rounds import rounds
from tabjob.planner.time_share import configs_sharing, round_share


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plan", help="resolve a manifest's resources into pods, ranks and parallel fits")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--output", "-o", choices=["table", "json"], default="table")
    p.add_argument("--no-data", action="store_true", help="do not read the training table's metadata")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    job = load_manifest(args.file)
    stats, why_not = table_stats(job.spec.data.train) if not args.no_data else (None, "--no-data")
    plan = plan_job(job, stats)
    if args.output == "json":
        print(plan.to_json())
    else:
        console = Console(width=None if sys.stdout.isatty() else 140)
        render_table(job, plan, console)
        console.print(memory_line(plan, why_not))
    return 0


def _gpus(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.3g}"


def _value(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else json.dumps(v)


def time_share(plan: Plan, order: int) -> str:
    """The ``may use`` cell: an even share of the time left until every family has had its turn, then a turn's
    worth (tabjob.planner.time_share); a round's configs (tabjob.planner.rounds) share theirs, shown on its first."""
    orders = next(r for r in rounds(plan.configs) if order in r)
    if order != orders[0]:
        return f"with #{orders[0]}"
    if len(orders) == 1:
        parts = configs_sharing(plan, order)
        return "all" if parts is None else f"1/{parts}"
    share = round_share(plan, orders)
    together = " and ".join(f"#{o}" for o in orders[1:])
    if share is None:
        return f"all, with {together}"
    parts = configs_sharing(plan, order)
    return f"{len(orders)}/{parts}, with {together}" if share < 1 else f"all, with {together}"


def hyperparameter_table(plan: Plan) -> Table:
    """What each fit trains with (the family's defaults under the config's or the trial's values), one row per
    config and trial: its folds train the same. Floats to 6 digits; ``--output json`` has them exact."""
    table = Table(title="Hyperparameters (every fit's, defaults included)", title_justify="left")
    for col in ("#", "model", "trial", "fits", "hyperparameters"):
        table.add_column(col, overflow="fold")
    rows: dict[tuple[int, str, int, str], list[FitPlan]] = {}
    for f in plan.fits:  # the hyperparameters in the key: fits that differ would get rows of their own
        rows.setdefault((f.order, f.model, f.trial, json.dumps(f.hyperparameters)), []).append(f)
    for (order, model, trial, _), fits in rows.items():
        shown = ", ".join(f"{k}={_value(v)}" for k, v in fits[0].hyperparameters.items())
        table.add_row(str(order), model, str(trial), str(len(fits)), shown)
    return table


def render_table(job: TabularJob, plan: Plan, console: Console) -> None:
    res = job.spec.resources
    console.print(
        f"[bold]{job.metadata.name}[/]: {len(plan.pods)} pod(s), {plan.world_size} torchrun rank(s), "
        f"{len(plan.fits)} fit(s); at the peak {plan.concurrency.fits} fit(s) at once "
        f"({plan.concurrency.trials} trial(s) x {plan.concurrency.folds} fold(s))"
    )
    pods = Table(title="Pods", title_justify="left")
    for col in ("pod", "ranks", "CPUs", f"GPUs ({res.gpu_resource})", "memory"):
        pods.add_column(col, justify="right" if col != "pod" else "left")
    for pod in plan.pods:
        ranks = f"{pod.first_rank}-{pod.first_rank + pod.procs - 1}" if pod.procs > 1 else str(pod.first_rank)
        pods.add_row(pod.name, ranks, str(pod.cpus), str(pod.gpus), pod.memory or "-")
    console.print(pods)

    configs = Table(title="Model configs (trained one after another, a round's together)", title_justify="left")
    timed = plan.time_limit_seconds is not None
    columns = ["#", "model", "per fit", "procs", "trials x folds at once", "fits", "peak", "placed on"]
    for col in columns + (["may use of the time left"] if timed else []):
        configs.add_column(col)
    for c in plan.configs:
        fits = [f for f in plan.fits if f.order == c.order]
        devices = sorted({f"r{r}:{f.device}" for f in fits for r in f.ranks[:1]})
        cells = [
            str(c.order),
            c.name if c.name == c.key else f"{c.name} ({c.key})",
            f"{c.cpus} CPU / {_gpus(c.gpus)} GPU",
            str(c.processes),
            f"{c.trials_parallel} x {c.folds_parallel} = {c.slots}",
            str(c.fits),
            f"{c.peak.cpus} CPU / {_gpus(c.peak.gpus)} GPU",
            ", ".join(devices[:6]) + (" ..." if len(devices) > 6 else ""),
        ]
        configs.add_row(*cells, *([time_share(plan, c.order)] if timed else []))
    console.print(configs)
    if timed:
        console.print(
            "may use of the time left: what a config may spend of the time left when it starts, an even share until "
            "every family has had its turn, then a turn's worth; a config that ends early leaves the rest to the next; "
            "configs 'with' another form a round: their folds are dealt over the slots as one, and the ranks wait "
            "for each other once, when it ends"
        )
    console.print(hyperparameter_table(plan))

    unused_cpus = res.cpus - plan.peak.cpus
    unused_gpus = res.gpus - plan.peak.gpus
    console.print(
        f"budget {res.cpus} CPU / {_gpus(res.gpus)} GPU; peak {plan.peak.cpus} CPU / {_gpus(plan.peak.gpus)} GPU; "
        f"pods request {plan.requested.cpus} CPU / {_gpus(plan.requested.gpus)} GPU; "
        f"unused budget {unused_cpus} CPU / {_gpus(max(unused_gpus, 0))} GPU"
    )
    for w in plan.warnings:
        console.print(f"[yellow]warning:[/] {w}")
