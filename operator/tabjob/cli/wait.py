"""``tabjob wait NAME``: follow a job to Succeeded or Failed with a progress bar; exit 1 when it failed."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("wait", help="wait for a TabularJob (fits done) or tp/NAME (rows scored) to finish")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--namespace", "-n", default=None)
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait at most (exit 2 on timeout)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def report(job: dict[str, Any]) -> int:
    from tabjob.cli.status import print_status

    print_status(job)
    return 0 if (job.get("status") or {}).get("phase") == "Succeeded" else 1


def run(args: argparse.Namespace) -> int:
    from tabjob.client import Client

    try:
        job = Client(namespace=args.namespace).wait(args.name, timeout=args.timeout, progress=not args.quiet)
    except TimeoutError as exc:
        print(f"timed out: {exc}", file=sys.stderr)
        return 2
    return report(job)
