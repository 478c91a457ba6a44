"""``tabjob validate FILE...``: exit 0 when every manifest is valid and plannable, else one line a problem."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tabjob.api import load_documents, parse_manifest
from tabjob.errors import SpecError
from tabjob.planner import plan_job


def add_parser(sub: Any) -> None:
    p = sub.add_parser("validate", help="check manifests: schema, then the planner's rules")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.set_defaults(func=run)


def problems_of(path: str) -> tuple[list[str], list[str]]:
    """(problems, summaries) for one file; every problem line names the file and the field."""
    try:
        docs = load_documents(path)
    except SpecError as exc:
        return [f"{path}: {msg}" for _, msg in exc.problems], []
    if not docs:
        return [f"{path}: (document): the file holds no YAML document"], []
    problems, summaries = [], []
    for i, doc in enumerate(docs):
        where = path if len(docs) == 1 else f"{path}[{i}]"
        try:
            job = parse_manifest(doc)
            plan = plan_job(job)
        except SpecError as exc:
            problems += [f"{where}: {line}" for line in exc.lines()]
            continue
        summaries.append(
            f"{where}: valid: {job.metadata.name}: {len(plan.pods)} pod(s), {plan.world_size} rank(s), "
            f"{int(plan.requested.gpus)} GPU(s), {len(plan.fits)} fit(s)"
        )
    return problems, summaries


def run(args: argparse.Namespace) -> int:
    failed = False
    for path in args.files:
        problems, summaries = problems_of(path)
        for line in summaries:
            print(line)
        for line in problems:
            print(line, file=sys.stderr)
        failed = failed or bool(problems)
    return 1 if failed else 0
