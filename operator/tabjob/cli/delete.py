"""``tabjob delete NAME``: delete a TabularJob; its pods, Service and ConfigMap go with it."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("delete", help="delete a TabularJob and its children")
    p.add_argument("name", metavar="NAME", nargs="+")
    p.add_argument("--namespace", "-n", default=None)
    p.add_argument("--wait", action="store_true", help="return once the job and its pods are gone")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tabjob.client import Client

    client = Client(namespace=args.namespace)
    for name in args.name:
        client.delete(name, wait=args.wait)
        print(f"tabularjob.tabjob.dev/{name} deleted")
    return 0
