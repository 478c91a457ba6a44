"""Waiting for a condition on a Kubernetes object, without the races of `kubectl wait --for=condition`.

kubectl 1.35's `wait --for=condition=X` gives up at once, instead of waiting, in two moments every freshly applied
object can be in:
- the object does not exist yet (NotFound; `--for=create` exists for that, but only one `--for` is allowed);
- its `.status.conditions` is null: a CustomResourceDefinition's status from its creation until the API server
  writes its first conditions (`.status.conditions accessor error: <nil> is of the type <nil>`). A
  `--for=jsonpath='{.status.conditions[?(@.type=="X")].status}'` fails there too ("is not array or slice and
  cannot be filtered").

`wait_condition` polls `kubectl get -o json` instead and counts everything short of "the condition has the value"
as not yet: NotFound, a type the API server does not serve yet, no `status`, null or empty `conditions`, the
condition absent or other, or one observed for an older generation (kubectl's rule). At its deadline it raises
with the object's last status and kubectl's last error, so a timeout says what the object was doing.

    python -m hack.cluster.wait crd/tabularjobs.tabjob.dev Established --timeout 60
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any


class ConditionTimeout(TimeoutError):
    """The condition was not met by the deadline; the message carries the last status and kubectl error."""


def condition_met(obj: Mapping[str, Any], condition: str, value: str = "True") -> bool:
    """Whether `obj` has `condition` with `value` for its current generation, as `kubectl wait` judges it (type and
    value compared case-insensitively; an observedGeneration older than metadata.generation is not yet)."""
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    for cond in status.get("conditions") or []:
        if not isinstance(cond, Mapping) or str(cond.get("type", "")).lower() != condition.lower():
            continue
        observed = cond.get("observedGeneration", status.get("observedGeneration"))
        if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
            return False
        return str(cond.get("status", "")).lower() == value.lower()
    return False


def wait_condition(
    kubectl: Sequence[str],
    ref: str,
    condition: str,
    *,
    namespace: str | None = None,
    value: str = "True",
    timeout: float = 60.0,
    interval: float = 2.0,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Poll until `ref` (e.g. `crd/tabularjobs.tabjob.dev`, `pod/p`) exists with `condition`=`value`; return it.

    `kubectl` is the command line up to the verb (`["kubectl"]`, `[path, "--kubeconfig=..."]`). Polls start at
    0.1 s and back off to `interval`, so a wait that ends at once costs one call and a long one few.
    """
    argv = [*kubectl, "get", ref, "-o", "json", *(["-n", namespace] if namespace else [])]
    where = f"{ref} in namespace {namespace}" if namespace else ref
    deadline = time.monotonic() + timeout
    pause = 0.1
    last: dict[str, Any] | None = None
    error = ""
    while True:
        left = deadline - time.monotonic()
        try:
            # A hung kubectl (an API server that accepts and never answers) must not outlast the deadline much.
            limit = max(5.0, min(left, 60.0))
            proc = subprocess.run(
                argv, capture_output=True, text=True, env=None if env is None else dict(env), timeout=limit
            )
        except subprocess.TimeoutExpired:
            error = f"`{' '.join(argv)}` did not answer"
        else:
            if proc.returncode != 0:
                error = proc.stderr.strip() or f"exit status {proc.returncode}"
            else:
                try:
                    last = json.loads(proc.stdout)
                except json.JSONDecodeError:
                    error = f"not JSON: {proc.stdout[:200]!r}"
                else:
                    error = ""
                    if condition_met(last, condition, value):
                        return last
        if time.monotonic() >= deadline:
            seen = "never read" if last is None else json.dumps(last.get("status"), sort_keys=True)
            raise ConditionTimeout(
                f"{where} did not have condition {condition}={value} within {timeout:g}s; last status: {seen}"
                + (f"; last kubectl error: {error}" if error else "")
            )
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, interval)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hack.cluster.wait", description=__doc__.splitlines()[0])
    p.add_argument("ref", help="TYPE/NAME, as kubectl get takes it")
    p.add_argument("condition", help="condition type, e.g. Established, Ready; CONDITION=VALUE for another value")
    p.add_argument("--namespace", "-n", default=None)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    p.add_argument("--kubectl", default="kubectl", help="the kubectl to run (default: the one on PATH)")
    args = p.parse_args(argv)
    condition, _, value = args.condition.partition("=")
    try:
        wait_condition(
            [args.kubectl], args.ref, condition, namespace=args.namespace, value=value or "True", timeout=args.timeout
        )
    except ConditionTimeout as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
