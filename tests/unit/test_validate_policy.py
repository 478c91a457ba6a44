"""`tabjob validate --policy VALUES`: the platform's policy from a chart values file, the verdict the API server's
admission policy and the operator give, offline (real subprocesses, as a platform team runs it in CI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.policy_cases import CASES, Case

ROOT = Path(__file__).resolve().parents[2]
CHART_VALUES = ROOT / "charts" / "tabjob" / "values.yaml"


def tabjob(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tabjob", *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def _write(tmp_path: Path, name: str, doc: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))  # JSON is YAML, and `label: y` stays a string
    return str(path)


def test_the_chart_s_own_values_refuse_the_documented_breach(tmp_path: Path) -> None:
    breach = Case("x", {}, {"scheduling": {"priorityClassName": "system-node-critical",
                                            "tolerations": [{"operator": "Exists"}]}})  # fmt: skip
    job = _write(tmp_path, "job.yaml", breach.manifest("breach"))
    assert tabjob("validate", job).returncode == 0  # the schema and planner alone admit it
    out = tabjob("validate", "--policy", str(CHART_VALUES), job)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        f"{job}: spec.scheduling.priorityClassName: system-node-critical is not allowed; this cluster allows any but "
        "system-*",
        f"{job}: spec.scheduling.tolerations[0].key: a toleration without a key (it tolerates every taint) is not "
        "allowed; this cluster allows tolerating nvidia.com/gpu, amd.com/gpu",
    ]


@pytest.mark.parametrize("case", [c for c in CASES if c.values], ids=[c.id for c in CASES if c.values])
def test_a_values_file_with_only_the_policy_it_changes(tmp_path: Path, case: Case) -> None:
    # Helm merges a values file over the chart's defaults; so does --policy.
    values = _write(tmp_path, "values.yaml", {"replicaCount": 1, "policy": case.values})
    out = tabjob("validate", "--policy", values, _write(tmp_path, "job.yaml", case.manifest()))
    refused = [line.split(": ", 2)[1] for line in out.stderr.splitlines()]
    assert (out.returncode, refused) == (1 if case.refused else 0, case.refused), out.stderr


def test_a_bad_policy_file_names_the_key(tmp_path: Path) -> None:
    values = _write(tmp_path, "values.yaml", {"policy": {"serviceAccount": ["default"]}})
    out = tabjob("validate", "--policy", values, str(ROOT / "examples" / "quickstart.yaml"))
    assert out.returncode == 2
    assert out.stderr.strip() == f"{values}: policy.serviceAccount: unknown key; policy takes priorityClasses, " \
        "tolerationKeys, serviceAccounts, volumeSources, maxResources, admission"  # fmt: skip


def test_every_example_passes_the_default_policy() -> None:
    examples = sorted(str(p) for p in (ROOT / "examples").glob("*.yaml"))
    out = tabjob("validate", "--policy", str(CHART_VALUES), *examples)
    assert out.returncode == 0, out.stderr
