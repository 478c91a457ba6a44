"""contracts/pod.py is the one place that spells what crosses the trainer pod's boundary, and both sides keep to it:
the builders set exactly its variables, the trainer reads every one it is declared to read, and reads none that
nothing sets. Like tests/unit/test_families.py for family names, a literal spelt anywhere else fails here."""

from __future__ import annotations

import ast
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

import tabjob.api  # noqa: F401  (before pod_identity, which the api imports in turn)
from tabjob.api.pod_identity import reserved_env_problem
from tabjob.api.status import ModelStatus
from tabjob.contracts import pod
from tabjob.contracts.results import COLUMN_OF, LEADERBOARD_COLUMNS, NOT_IN_STATUS, FitState, ModelResult
from tests.unit.test_builders import GPU_JOB, container, manifest, render

ROOT = Path(__file__).resolve().parents[2]
# By path, not pod.__file__: with a PYTHONPATH naming another checkout the module imported is that one's, and this
# checkout's contract would be read as a product file spelling its own literals.
CONTRACT = ROOT / "operator" / "tabjob" / "contracts" / "pod.py"
PRODUCT = [ROOT / "operator" / "tabjob", ROOT / "trainer" / "tabjob_trainer"]
TRAINER = ROOT / "trainer" / "tabjob_trainer"
# Contract values that are also plain words or file names elsewhere ("trainer" is a component label's value too,
# "metrics" a dict key, "/tmp" the serving pod's HOME, spec.json a file in every run directory): the builders
# still take them from the contract, but a match elsewhere proves nothing.
COMMON = {pod.CONTAINER, pod.RENDEZVOUS_PORT_NAME, pod.PROGRESS_PORT_NAME, pod.METRICS_PORT_NAME, pod.SCRATCH_DIR,
          pod.SPEC_KEY, pod.PLAN_KEY}  # fmt: skip
PATHS = {pod.CONFIG_DIR, pod.DATA_DIR, pod.OUTPUT_DIR, pod.TERMINATION_LOG}


def _declared() -> tuple[set[str], set[int], list[pod.Var]]:
    """The contract's string literals, its port numbers and its variables, read off the module itself."""
    values = [getattr(pod, name) for name in dir(pod) if name.isupper()]
    variables = [v for v in values if isinstance(v, pod.Var)]
    strings = {v for v in values if isinstance(v, str)} | {v.name for v in variables}
    ports = {v for v in values if isinstance(v, int) and not isinstance(v, bool)}
    return strings - COMMON, ports, variables


def _sources() -> Iterator[tuple[Path, ast.Module]]:
    for top in PRODUCT:
        for path in sorted(top.rglob("*.py")):
            if path != CONTRACT:
                yield path, ast.parse(path.read_text(), str(path))


def _spells(value: object, strings: set[str], ports: set[int]) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value in ports
    if not isinstance(value, str):
        return False
    return (
        value in strings
        or any(value.startswith(p + "/") for p in PATHS)  # a path under a mount, f"/output/{name}" included
        or pod.TRAINER_REPOSITORY in value
    )


def test_no_product_file_but_the_contract_spells_a_pod_literal() -> None:
    strings, ports, _ = _declared()
    spelt = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for path, tree in _sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and _spells(node.value, strings, ports)
    ]
    assert spelt == [], "spell these through tabjob.contracts.pod:\n" + "\n".join(spelt)
    # The patterns are not vacuous: each kind of fact is among them.
    assert {"/output", "TABJOB_OUTPUT", "POD_IP", "tabjob.dev/job-name", "kueue.x-k8s.io/queue-name"} <= strings
    assert {29500, 29501, 29502} == ports


def _contract_refs(tree: ast.Module) -> set[str]:
    """The contract's names a module refers to: pod.X (under whatever name it imports the module) or an X imported
    from it."""
    modules: set[str] = set()
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "tabjob.contracts":
            modules |= {a.asname or a.name for a in node.names if a.name == "pod"}
        elif isinstance(node, ast.ImportFrom) and node.module == "tabjob.contracts.pod":
            names |= {a.asname or a.name: a.name for a in node.names}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            found.add(node.attr)
        elif isinstance(node, ast.Name) and node.id in names:
            found.add(names[node.id])
    return found


def _trainer_reads() -> tuple[set[str], list[str]]:
    """The contract's variables the trainer refers to, and every other reserved name it spells (a variable that
    nothing in the contract sets)."""
    variables = {name for name in dir(pod) if isinstance(getattr(pod, name), pod.Var)}
    refs: set[str] = set()
    stray: list[str] = []
    for path in sorted(TRAINER.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        refs |= {getattr(pod, n).name for n in _contract_refs(tree) & variables}
        stray += [
            f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.isupper()
            and node.value.replace("_", "").isalnum()
            and reserved_env_problem(node.value)
        ]
    return refs, stray


def test_the_builders_set_exactly_the_contract_s_variables() -> None:
    for spec in ({}, GPU_JOB):
        pods, _, _ = render(manifest(**spec))
        for p in pods:
            env = container(p)["env"]
            assert [e["name"] for e in env] == [v.name for v in (*pod.POD_ENV, *pod.FIELD_ENV)]
            assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in env if "valueFrom" in e} == {
                v.name: v.field_path for v in pod.FIELD_ENV
            }


def test_every_variable_set_is_read_and_every_variable_read_is_set() -> None:
    pods, _, _ = render(manifest(**GPU_JOB))
    emitted = {e["name"] for p in pods for e in container(p)["env"]}  # tabjob's own only: the job adds none here
    declared = {v.name: v for v in (*pod.POD_ENV, *pod.FIELD_ENV, *pod.TORCHRUN_ENV, *pod.TRAINER_SETTINGS)}
    _, _, variables = _declared()
    # Every variable the contract declares is set by someone: the builders, torchrun, or the launcher or a person
    # running the trainer by hand (TRAINER_SETTINGS).
    assert {v.name for v in variables} <= set(declared)
    refs, stray = _trainer_reads()
    # Read: each variable the builders set for the trainer (the contract says who reads each), it reads.
    unread = sorted(n for n in emitted if declared[n].read_by == "trainer" and n not in refs)
    assert unread == [], f"set for the trainer, never read by it: {unread}"
    # Set: each contract variable the trainer reads is set by the builders, torchrun or TRAINER_SETTINGS' setters,
    # and it spells no other variable of tabjob's own namespace (TABJOB_HOST_IP was read and set by nothing).
    settings = {v.name for v in (*pod.TORCHRUN_ENV, *pod.TRAINER_SETTINGS)}
    assert refs - emitted - settings == set(), "read by the trainer, set by nothing"
    assert stray == [], "read by the trainer, set by nothing:\n" + "\n".join(stray)
    # The variables for the trainer that no pod sets are the trainer's to read too.
    assert {v.name for v in pod.TRAINER_SETTINGS if v.read_by == "trainer"} <= refs


def test_the_chart_carries_the_contract_s_defaults() -> None:
    chart = ROOT / "charts" / "tabjob"
    trainer = yaml.safe_load((chart / "values.yaml").read_text())["trainer"]
    assert trainer["image"]["repository"] == pod.TRAINER_REPOSITORY
    ports = (trainer["rendezvousPort"], trainer["progressPort"], trainer["metricsPort"])
    assert ports == (pod.RENDEZVOUS_PORT, pod.PROGRESS_PORT, pod.METRICS_PORT)
    assert f"| {pod.RENDEZVOUS_PORT}, {pod.PROGRESS_PORT}, {pod.METRICS_PORT} |" in (chart / "README.md").read_text()
    monitor = (chart / "templates" / "podmonitor.yaml").read_text()
    assert f"key: {pod.LABEL_JOB}" in monitor and f"port: {pod.METRICS_PORT_NAME}" in monitor


def _types(schema: dict[str, Any]) -> set[str]:
    """A JSON schema property's types, whatever its bounds, enum or description."""
    options = schema.get("anyOf", [schema])
    return {o.get("type", "string" if "enum" in o else "?") for o in options}


def test_the_leaderboard_row_has_one_shape_in_the_run_the_summary_and_the_status() -> None:
    # leaderboard.json's columns, the termination message's ModelResult and status.models[] (ModelStatus, the CRD's
    # schema): every field of the summary's row comes from one column, and status shows the same fields, typed
    # alike, but the ones it leaves out on purpose.
    assert set(COLUMN_OF) == set(ModelResult.model_fields)
    assert set(COLUMN_OF.values()) <= set(LEADERBOARD_COLUMNS)
    assert set(NOT_IN_STATUS) < set(ModelResult.model_fields)
    assert set(ModelStatus.model_fields) == set(ModelResult.model_fields) - set(NOT_IN_STATUS)
    result, status = ModelResult.model_json_schema()["properties"], ModelStatus.model_json_schema()["properties"]
    for name, field in ModelStatus.model_fields.items():
        alias = field.alias or name
        assert _types(status[alias]) == _types(result[alias]), name
    # The state is a FitState, and nothing writes another (a "Running" row never existed).
    described = ModelStatus.model_fields["state"].description or ""
    assert re.findall(r"[A-Z][a-z]+", described) == list(typing.get_args(FitState))
