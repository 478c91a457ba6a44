"""The ``tabjob`` command line: one module per verb, each exposing ``add_parser(subparsers)``.

Verbs are imported lazily by name so that ``tabjob validate`` stays fast and the control side never
imports torch or lightgbm (``run``, ``predict``, ``export``, ``serve`` and ``report`` hand the heavy work to
tabjob_trainer).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tabjob import __version__
from tabjob.api.errors import SpecError

# Order is the order of `tabjob --help`.
VERBS = [
    "validate",
    "plan",
    "render",
    "run",
    "predict",
    "score",
    "export",
    "serve",
    "report",
    "from_autogluon",
    "submit",
    "status",
    "wait",
    "logs",
    "delete",
    "operator",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tabjob",
        description="Tabular ML training jobs on Kubernetes GPUs, or on this machine.",
    )
    parser.add_argument("--version", action="version", version=f"tabjob {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="COMMAND")
    for verb in VERBS:
        try:
            module = importlib.import_module(f"tabjob.cli.{verb}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tabjob.cli.{verb}":
                continue  # a verb whose module is not part of this build
            raise
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SpecError as exc:
        for line in exc.lines():
            print(f"error: {line}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `tabjob plan ... | head`: the reader left; say nothing more.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
