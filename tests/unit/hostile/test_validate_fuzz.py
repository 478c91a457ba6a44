"""Fuzzing `tabjob validate` in-process: any manifest, any text, any bytes give lines, never a traceback."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabjob.cli.validate import problems_of
from tests.unit.hostile.fuzz_manifests import manifests

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _validate(data: bytes) -> tuple[list[str], list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.yaml"
        path.write_bytes(data)
        problems, summaries = problems_of(str(path))
    assert bool(problems) != bool(summaries), (problems, summaries)
    assert all(line.startswith(f"{path}") and "\n" not in line for line in problems + summaries)
    return problems, summaries


@FUZZ
@given(manifests())
def test_mutated_manifests_never_crash(doc: dict[str, Any]) -> None:
    _validate(yaml.safe_dump(doc, allow_unicode=True).encode())


@FUZZ
@given(st.text(max_size=400))
def test_any_text_never_crashes(text: str) -> None:
    _validate(text.encode("utf-8", errors="surrogatepass"))


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_never_crash(data: bytes) -> None:
    _validate(data)


@FUZZ
@given(manifests(), st.integers(0, 2000), st.text(max_size=6))
def test_manifests_with_a_splice_never_crash(doc: dict[str, Any], at: int, splice: str) -> None:
    text = yaml.safe_dump(doc)
    _validate((text[:at] + splice + text[at:]).encode("utf-8", errors="surrogatepass"))
