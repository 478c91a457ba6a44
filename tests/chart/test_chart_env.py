"""Every TABJOB_* variable and every flag the chart gives the operator is one the operator really reads, so a
renamed setting in operator/tabjob/controller/config.py or cli/operator.py cannot silently turn a chart value into a
no-op."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tabjob
from hack.chart_tools import NON_DEFAULT, objects

PACKAGE = Path(tabjob.__file__).parent
# Names the chart sets ahead of the operator reading them (none now); each must be explained where it is set.
PROPOSED: set[str] = set()


def _operator_container(values: list[str]) -> dict:
    (deploy,) = [o for o in objects(*values) if o["kind"] == "Deployment"]
    return deploy["spec"]["template"]["spec"]["containers"][0]


def _read_by_operator(name: str) -> bool:
    return any(f'"{name}"' in p.read_text() for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("values", [[], NON_DEFAULT], ids=["default", "non-default"])
def test_env_names_are_read_by_the_operator(values: list[str]) -> None:
    names = {e["name"] for e in _operator_container(values)["env"]} - {"EXTRA"}
    unread = sorted(n for n in names - PROPOSED if not _read_by_operator(n))
    assert not unread, f"the chart sets {unread}, which nothing in {PACKAGE} reads"


@pytest.mark.parametrize("values", [[], NON_DEFAULT], ids=["default", "non-default"])
def test_command_and_flags_exist(values: list[str]) -> None:
    c = _operator_container(values)
    assert c["command"] == ["tabjob", "operator"]
    # argparse rejects an unknown flag; --help after the chart's args proves each one parses.
    proc = subprocess.run(
        [sys.executable, "-m", "tabjob", "operator", *c["args"], "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    help_text = proc.stdout
    for arg in c["args"]:
        assert arg.split("=")[0] in help_text, f"`tabjob operator` has no {arg} flag"
