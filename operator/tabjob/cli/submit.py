"""``tabjob submit FILE``: validate (and plan) locally, then create the TabularJob or TabularPrediction (optionally
wait for it)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("submit", help="create a TabularJob or TabularPrediction on the cluster from a manifest")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--namespace", "-n", default=None)
    p.add_argument("--wait", action="store_true", help="then wait for it to finish, with a progress bar")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait at most (with --wait)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tabjob.client import Client

    client = Client(namespace=args.namespace)
    job = client.submit(args.file)
    name = job["metadata"]["name"]
    kind = str(job.get("kind") or "TabularJob").lower()
    print(f"{kind}.tabjob.dev/{name} created in namespace {job['metadata']['namespace']}")
    if not args.wait:
        return 0
    from tabjob.cli.wait import report

    ref = f"tp/{name}" if kind == "tabularprediction" else name
    return report(client.wait(ref, job["metadata"]["namespace"], timeout=args.timeout))
