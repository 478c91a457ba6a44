"""BENCHMARKS.md is written section by section: each renderer owns the text between its two HTML-comment markers."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"  # the recorded results the renderers read
BENCHMARKS = ROOT / "BENCHMARKS.md"


def replace_between(document: str, begin: str, end: str, section: str) -> str:
    head, rest = document.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{section}\n{end}{tail}"


def write_section(begin: str, end: str, section: str) -> None:
    BENCHMARKS.write_text(replace_between(BENCHMARKS.read_text(), begin, end, section))
