"""``tabjob delete NAME|tp/NAME``: delete a TabularJob (its pods, Service and ConfigMap go with it) or a
TabularPrediction (its pods go; its output stays in the bucket)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("delete", help="delete a TabularJob (or tp/NAME, a TabularPrediction) and its children")
    p.add_argument("name", metavar="NAME", nargs="+")
    p.add_argument("--namespace", "-n", default=None)
    p.add_argument("--wait", action="store_true", help="return once the job and its pods are gone")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tabjob.client import Client

    client = Client(namespace=args.namespace)
    for name in args.name:
        from tabjob.client import PREDICTION_PLURAL, split_ref

        plural, bare = split_ref(name)
        client.delete(name, wait=args.wait)
        kind = "tabularprediction" if plural == PREDICTION_PLURAL else "tabularjob"
        print(f"{kind}.tabjob.dev/{bare} deleted")
    return 0
