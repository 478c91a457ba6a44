"""hack/cluster/wait.py against a fake kubectl whose answers walk a fresh object through the moments in which
`kubectl wait --for=condition` gives up instead of waiting: NotFound, no status, a CRD's null conditions."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hack.cluster.wait import ConditionTimeout, condition_met, main, wait_condition

ROOT = Path(__file__).resolve().parents[2]

FAKE_KUBECTL = """\
import json, pathlib, sys
here = pathlib.Path(__file__).parent
answers = json.loads((here / "answers.json").read_text())
with open(here / "calls.log", "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
calls = len((here / "calls.log").read_text().splitlines())
answer = answers[min(calls, len(answers)) - 1]
sys.stdout.write(answer.get("stdout", ""))
sys.stderr.write(answer.get("stderr", ""))
sys.exit(answer.get("rc", 0))
"""

NOT_FOUND = {
    "rc": 1,
    "stderr": 'Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io "podmonitors.x" not found',
}


def crd(conditions: Any, generation: int = 1) -> dict[str, Any]:
    """A CRD as the API server answers it; right after its creation `conditions` is null, not absent."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "podmonitors.x", "generation": generation},
        "status": {"acceptedNames": {"kind": "", "plural": ""}, "conditions": conditions, "storedVersions": ["v1"]},
    }


def cond(ctype: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": f"Reason{status}", "message": f"{ctype} is {status}", **extra}


def answered(obj: dict[str, Any]) -> dict[str, Any]:
    return {"stdout": json.dumps(obj)}


@pytest.fixture
def kubectl(tmp_path: Path) -> Any:
    """kubectl(*answers) -> (argv prefix of a fake kubectl that gives these answers in turn, then the last again,
    a function that returns the argument lists it was called with)."""
    (tmp_path / "kubectl.py").write_text(FAKE_KUBECTL)

    def make(*answers: dict[str, Any]) -> tuple[list[str], Any]:
        (tmp_path / "answers.json").write_text(json.dumps(list(answers)))
        calls = tmp_path / "calls.log"

        def called() -> list[list[str]]:
            return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []

        return [sys.executable, str(tmp_path / "kubectl.py")], called

    return make


def test_waits_through_not_found_no_status_null_conditions_and_false(kubectl: Any) -> None:
    ready = crd([cond("NamesAccepted", "True"), cond("Established", "True")])
    argv, called = kubectl(
        NOT_FOUND,
        answered({k: v for k, v in crd(None).items() if k != "status"}),
        answered(crd(None)),
        answered(crd([])),
        answered(crd([cond("NamesAccepted", "True"), cond("Established", "False")])),
        answered(ready),
        answered(crd([cond("Established", "False")])),  # never reached: the wait ends at the first True
    )
    got = wait_condition(argv, "crd/podmonitors.x", "Established", timeout=30, interval=0.2)
    assert got == ready
    calls = called()
    assert len(calls) == 6, calls
    assert all(c == ["get", "crd/podmonitors.x", "-o", "json"] for c in calls), calls


def test_a_pod_becomes_ready_in_its_namespace(kubectl: Any) -> None:
    pending = {"kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Pending", "qosClass": "BestEffort"}}
    running = {**pending, "status": {"phase": "Running", "conditions": [cond("Ready", "True")]}}
    argv, called = kubectl(answered(pending), answered(running))
    assert wait_condition(argv, "pod/p", "Ready", namespace="ns1", timeout=30) == running
    assert called() == [["get", "pod/p", "-o", "json", "-n", "ns1"]] * 2


def test_times_out_with_the_last_status_and_the_timeout(kubectl: Any) -> None:
    stuck = crd([cond("Established", "False", reason="Installing")])
    argv, called = kubectl(NOT_FOUND, answered(crd(None)), answered(stuck))
    started = time.monotonic()
    with pytest.raises(ConditionTimeout) as caught:
        wait_condition(argv, "crd/podmonitors.x", "Established", timeout=1.5, interval=0.2)
    took = time.monotonic() - started
    message = str(caught.value)
    assert "crd/podmonitors.x did not have condition Established=True within 1.5s" in message
    assert f"last status: {json.dumps(stuck['status'], sort_keys=True)}" in message
    assert "last kubectl error" not in message  # the last answer was the object itself
    assert 1.5 <= took < 10, took
    assert len(called()) >= 4  # it kept asking after the stuck status first came


def test_times_out_with_kubectl_last_error_and_the_last_status_it_saw(kubectl: Any) -> None:
    argv, _ = kubectl(answered(crd(None)), {"rc": 1, "stderr": "The connection to the server was refused\n"})
    with pytest.raises(ConditionTimeout) as caught:
        wait_condition(argv, "crd/podmonitors.x", "Established", namespace="ns", timeout=1, interval=0.2)
    message = str(caught.value)
    assert "crd/podmonitors.x in namespace ns did not have condition Established=True" in message
    assert '"conditions": null' in message
    assert message.endswith("last kubectl error: The connection to the server was refused")


def test_an_object_never_found_says_so(kubectl: Any) -> None:
    argv, _ = kubectl(NOT_FOUND)
    with pytest.raises(ConditionTimeout, match=r"last status: never read; last kubectl error: .*NotFound"):
        wait_condition(argv, "crd/podmonitors.x", "Established", timeout=0.5, interval=0.1)


def test_a_missing_kubectl_fails_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(FileNotFoundError):
        wait_condition([str(tmp_path / "no-kubectl")], "crd/x", "Established", timeout=30)
    assert time.monotonic() - started < 5


GEN2 = {"generation": 2}


@pytest.mark.parametrize(
    ("obj", "want", "met"),
    [
        ({}, "True", False),
        ({"status": None}, "True", False),
        ({"status": {"conditions": None}}, "True", False),
        ({"status": {"conditions": [cond("Ready", "True")]}}, "True", True),
        ({"status": {"conditions": [cond("ready", "true")]}}, "True", True),  # kubectl compares case-insensitively
        ({"status": {"conditions": [cond("Ready", "False")]}}, "True", False),
        ({"status": {"conditions": [cond("Ready", "False")]}}, "False", True),
        ({"status": {"conditions": [cond("Other", "True"), "junk"]}}, "True", False),
        # A condition observed for an older generation is stale, wherever the observedGeneration is written.
        ({"metadata": GEN2, "status": {"conditions": [cond("Ready", "True", observedGeneration=1)]}}, "True", False),
        ({"metadata": GEN2, "status": {"observedGeneration": 1, "conditions": [cond("Ready", "True")]}}, "True", False),
        ({"metadata": GEN2, "status": {"conditions": [cond("Ready", "True", observedGeneration=2)]}}, "True", True),
    ],
)
def test_condition_met(obj: dict[str, Any], want: str, met: bool) -> None:
    assert condition_met(obj, "Ready", want) is met


def test_the_command_line_exits_1_with_the_reason(kubectl: Any, capsys: pytest.CaptureFixture[str]) -> None:
    argv, _ = kubectl(answered(crd([cond("Established", "False")])))
    script = argv[1]
    # main() takes one kubectl executable; the fake is a script, so make it one.
    Path(script).write_text(f"#!{sys.executable}\n" + Path(script).read_text())
    Path(script).chmod(0o755)
    assert main(["crd/podmonitors.x", "Established", "--timeout", "0.3", "--kubectl", script]) == 1
    assert "did not have condition Established=True within 0.3s" in capsys.readouterr().err
    assert main(["crd/podmonitors.x", "Established=False", "--timeout", "5", "--kubectl", script]) == 0


CODE = ("*.py", "*.sh", "*.mk", "Makefile", "*.yaml", "*.yml", "*.tpl")
RACY = re.compile(r"for=condition|for=.?jsonpath=.*\[\?\(")


def test_no_code_waits_with_kubectl_wait_for_a_condition() -> None:
    """Every test, fixture, bench and script waits through hack/cluster/wait.py. A `kubectl wait` that only checks
    (--timeout=0s) an object already known to have its conditions is allowed."""
    found = []
    for top in ("tests", "bench", "hack", "charts", "operator", "trainer", "Makefile"):
        base = ROOT / top
        files = [base] if base.is_file() else [p for pattern in CODE for p in base.rglob(pattern)]
        for path in files:
            if path in (Path(__file__).resolve(), ROOT / "hack" / "cluster" / "wait.py") or ".venv" in path.parts:
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if RACY.search(line) and "--timeout=0s" not in line:
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == [], "use hack.cluster.wait.wait_condition instead:\n" + "\n".join(found)
