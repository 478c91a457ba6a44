"""`helm template` for default and non-default values, applied with `kubectl apply --dry-run=server` to the local
control plane: the API server validates every object against its schema, runs admission (PodSecurity at the
restricted level included) and RBAC's escalation check, and persists nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import yaml

from hack.chart_tools import NON_DEFAULT, kubectl, render
from tests.chart.conftest import run

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds_installed")]


def _apply(env: dict[str, str], docs: list[dict], dry_run: bool = True) -> str:
    argv = [kubectl(), "apply", "-f", "-"] + (["--dry-run=server"] if dry_run else [])
    proc = run(env, *argv, stdin=yaml.safe_dump_all(docs))
    # PodSecurity only warns for a Deployment's pod template; a warning is a failure here.
    assert "would violate PodSecurity" not in proc.stderr, proc.stderr
    return proc.stdout


def _dry_run(env: dict[str, str], manifest: str) -> str:
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    # The helm test pod is admitted only once its ServiceAccount exists (a dry run creates nothing), so that one
    # ServiceAccount is created for real first (the namespace is thrown away after the test).
    test_sa = [d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"].endswith("-test")]
    _apply(env, test_sa, dry_run=False)
    return _apply(env, docs)


def test_default_values_apply(kube_env: dict[str, str], restricted_namespaces: Callable[[str], str]) -> None:
    ns = restricted_namespaces("tabjob-system")
    out = _dry_run(kube_env, render(namespace=ns))
    for created in [
        "deployment.apps/t-tabjob",
        "clusterrole.rbac.authorization.k8s.io/t-tabjob",
        "role.rbac.authorization.k8s.io/t-tabjob-leader-election",
        "service/t-tabjob-metrics",
        "pod/t-tabjob-test",
    ]:
        assert f"{created} created (server dry run)" in out, out


def test_non_default_values_apply(kube_env: dict[str, str], restricted_namespaces: Callable[[str], str]) -> None:
    ns, a, b = restricted_namespaces("tabjob-system"), restricted_namespaces("tj-a"), restricted_namespaces("tj-b")
    values = [v.replace("{tj-a,tj-b}", f"{{{a},{b}}}") for v in NON_DEFAULT]
    out = _dry_run(kube_env, render(*values, namespace=ns))
    assert "clusterrole" not in out, out
    for created in [
        "role.rbac.authorization.k8s.io/t-tabjob",
        "serviceaccount/tabjob-sa",
        "networkpolicy.networking.k8s.io/t-tabjob",
        "pod/t-tabjob-test",
    ]:
        assert f"{created} created (server dry run)" in out, out
