"""``tabjob logs NAME [--rank N] [-f]``: the trainer's log of one pod (node rank 0 by default)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("logs", help="print the log of a TabularJob's pod (or of tp/NAME's scoring pod of index --rank)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--namespace", "-n", default=None)
    p.add_argument("--rank", type=int, default=0, help="node rank (pod index) whose log to print")
    p.add_argument("--follow", "-f", action="store_true")
    p.add_argument("--tail", type=int, default=None, help="last N lines only")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tabjob.client import Client

    client = Client(namespace=args.namespace)
    try:
        for line in client.logs(args.name, args.rank, follow=args.follow, tail=args.tail):
            print(line, flush=args.follow)
    except LookupError as exc:
        print(f"error: {_no_pod(client, args.name, str(exc))}", file=sys.stderr)
        return 1
    return 0


def _no_pod(client: Any, name: str, why: str) -> str:
    """Why there is no log to show: a job that has not started its pods yet, or one that ended and whose pods are
    gone (deleted with its verdict, or by its TTL), whose status says what happened."""
    try:
        status = client.get(name).get("status") or {}
    except Exception:  # the job itself is gone or unreadable: the lookup's own words suffice
        return why
    phase = status.get("phase") or "Pending"
    if phase in ("Succeeded", "Failed"):
        message = status.get("message") or ""
        return f"{name} is {phase} and the pod has no log to show any more; its status says: {message}"
    return f"{why}: {name} is {phase}"
