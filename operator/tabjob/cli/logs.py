"""``tabjob logs NAME [--rank N] [-f]``: the trainer's log of one pod (node rank 0 by default)."""

from __future__ import annotations

import argparse
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

    for line in Client(namespace=args.namespace).logs(args.name, args.rank, follow=args.follow, tail=args.tail):
        print(line, flush=args.follow)
    return 0
