"""``tabjob validate FILE...``: exit 0 when every manifest is valid and plannable, else one line a problem.

With ``--policy VALUES`` each job is also held to the platform's policy of a chart values file (its ``policy:``
key), as the API server's ValidatingAdmissionPolicy and the operator hold it (tabjob.api.platform_policy).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tabjob.api import load_documents, parse_manifest, to_manifest
from tabjob.api.errors import SpecError
from tabjob.api.platform_policy import Policy, PolicyError, check_policy
from tabjob.api.prediction_parse import is_prediction, parse_prediction
from tabjob.cli.tablestats import table_stats
from tabjob.contracts.plan import Plan
from tabjob.planner import plan_job
from tabjob.planner.memory import mib


def add_parser(sub: Any) -> None:
    p = sub.add_parser("validate", help="check manifests: schema, then the planner's rules")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument(
        "--policy",
        metavar="VALUES",
        help="also check the platform policy in this chart values file (its `policy:` key; keys it leaves out take "
        "the chart's defaults, as `helm install -f VALUES` would)",
    )
    p.add_argument(
        "--no-data",
        action="store_true",
        help="do not read the training table's metadata (its footers) to check each pod's memory against it",
    )
    p.set_defaults(func=run)


def memory_line(plan: Plan, why_not: str) -> str:
    """How the table is read and what each pod needs, or why the memory was not checked."""
    reading = "sharded" if plan.reading.mode == "sharded" else f"whole ({plan.reading.reason})"
    if plan.memory is None:
        return f"reads {reading}; memory not checked: {why_not}"
    pods = ", ".join(
        f"{mib(need)}" + (f" of {mib(limit)}" if limit is not None else " (no limit)")
        for need, limit in zip(plan.memory.pod_bytes, plan.memory.pod_limits, strict=True)
    )
    return f"reads {reading}; estimated peak per pod: {pods}"


def read_policy(path: str) -> Policy:
    """The `policy:` of a chart values file, as Helm merges it over the chart's defaults."""
    try:
        docs = load_documents(path)
    except SpecError as exc:
        raise PolicyError("; ".join(msg for _, msg in exc.problems)) from None
    values = docs[0] if len(docs) == 1 else None
    if not isinstance(values, dict):
        raise PolicyError("a chart values file is one YAML mapping")
    policy = values.get("policy")
    if policy is not None and not isinstance(policy, dict):
        raise PolicyError("policy: a mapping (see charts/tabjob/values.yaml)")
    return Policy.from_values(policy)


def problems_of(path: str, policy: Policy | None = None, data: bool = False) -> tuple[list[str], list[str]]:
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
        if is_prediction(doc):
            try:
                tp = parse_prediction(doc)
            except SpecError as exc:
                problems += [f"{where}: {line}" for line in exc.lines()]
                continue
            summaries.append(f"{where}: valid: TabularPrediction {tp.metadata.name}: {tp.spec.parallelism} pod(s)")
            continue
        try:
            job = parse_manifest(doc)
            stats, why_not = table_stats(job.spec.data.train) if data else (None, "--no-data")
            plan = plan_job(job, stats)
        except SpecError as exc:
            problems += [f"{where}: {line}" for line in exc.lines()]
            continue
        refused = check_policy(to_manifest(job)["spec"], policy) if policy is not None else []
        if refused:
            problems += [f"{where}: {field}: {msg}" for field, msg in refused]
            continue
        summaries.append(
            f"{where}: valid: {job.metadata.name}: {len(plan.pods)} pod(s), {plan.world_size} rank(s), "
            f"{int(plan.requested.gpus)} GPU(s), {len(plan.fits)} fit(s)"
        )
        summaries.append(f"{where}: {memory_line(plan, why_not)}")
    return problems, summaries


def run(args: argparse.Namespace) -> int:
    policy = None
    if args.policy:
        try:
            policy = read_policy(args.policy)
        except (OSError, PolicyError) as exc:
            print(f"{args.policy}: {exc}", file=sys.stderr)
            return 2
    failed = False
    for path in args.files:
        problems, summaries = problems_of(path, policy, data=not args.no_data)
        for line in summaries:
            print(line)
        for line in problems:
            print(line, file=sys.stderr)
        failed = failed or bool(problems)
    return 1 if failed else 0
