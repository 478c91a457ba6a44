"""Fuzzing `tabjob validate` in-process: any manifest, any text, any bytes give lines, never a traceback."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabjob.api.manifest_yaml import dump_yaml, parse_yaml
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


json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12) | st.sampled_from(["y", "N", "yes", "off", "1e20", "0777", "1:30", "2024-01-01", "~"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@FUZZ
@given(json_like)
def test_what_tabjob_writes_kubectl_reads_back_unchanged(data: Any) -> None:
    # `tabjob from-autogluon` and `tabjob render` print YAML for kubectl: `label: y` unquoted would reach the API
    # server as true, `1e20` as a number.
    assert parse_yaml(dump_yaml(data), "out") == ([data] if data is not None else [])
