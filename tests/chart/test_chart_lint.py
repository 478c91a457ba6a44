"""helm lint --strict, the chart's version tie to the package, and the values schema's messages."""

from __future__ import annotations

import subprocess
import tomllib

import pytest
import yaml

import tabjob
from hack.chart_tools import CHART, NON_DEFAULT, REPO, RenderError, helm, render


@pytest.mark.parametrize("values", [[], NON_DEFAULT], ids=["default", "non-default"])
def test_helm_lint_strict(values: list[str]) -> None:
    proc = subprocess.run([helm(), "lint", "--strict", str(CHART), *values], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_app_version_is_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"] == tabjob.__version__


def test_chart_crd_is_the_generated_one() -> None:
    # The chart's copy comes from `make crds`; a hand edit here would silently differ from crds/.
    for name in ("tabjob.dev_tabularjobs.yaml", "tabjob.dev_tabularpredictions.yaml"):
        assert (CHART / "crds" / name).read_bytes() == (REPO / "crds" / name).read_bytes()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("replicaCount=-1", "at '/replicaCount': minimum"),
        ("watchNamespaces={Not_A_Namespace}", "at '/watchNamespaces/0'"),
        ("operator.verbose=loud", "at '/operator/verbose': got string, want boolean"),
        ("operator.progressInterval=0", "at '/operator/progressInterval'"),
        ("trainer.runAsUser=0", "at '/trainer/runAsUser': minimum"),
        ("trainer.image.pullPolicy=Sometimes", "at '/trainer/image/pullPolicy': value must be one of"),
        ("metrics.port=70000", "at '/metrics/port': maximum"),
        ("image.digest=latest", "at '/image/digest'"),
        ("metrics.serviceMonitor.interval=often", "at '/metrics/serviceMonitor/interval'"),
        ("operator.extraEnv[0].name=X,operator.extraEnv[0].value=1", "at '/operator/extraEnv/0/value'"),
        ("replicas=2", "additional properties 'replicas' not allowed"),
        ("metrics.port=8081", "metrics.port and operator.healthPort are both 8081"),
        ("policy.volumeSources={hostPath}", "at '/policy/volumeSources/0': value must be one of"),
        ("policy.serviceAccounts={Ops_SA}", "at '/policy/serviceAccounts/0'"),
        ("policy.maxResources.cpus=0", "at '/policy/maxResources/cpus': minimum"),
        ("policy.maxResources.memory=lots", "at '/policy/maxResources/memory'"),
        ("policy.admission=maybe", "at '/policy/admission': got string, want boolean"),
    ],
)
def test_wrong_values_fail_with_the_key_named(setting: str, message: str) -> None:
    with pytest.raises(RenderError) as err:
        render("--set", setting)
    assert message in str(err.value)


def test_monitors_need_the_prometheus_operator_crds() -> None:
    with pytest.raises(RenderError, match="needs the prometheus-operator CRDs"):
        render("--set", "metrics.serviceMonitor.enabled=true")
