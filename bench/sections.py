"""BENCHMARKS.md is written section by section: each renderer owns the text between its two HTML-comment markers."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"  # the recorded results the renderers read
BENCHMARKS = ROOT / "BENCHMARKS.md"


def score_text(v: float | None) -> str:
    """A test score as the sections print it: four decimals, or one with thousands' commas for large errors (rmse in
    dollars); "-" where there is none."""
    if v is None:
        return "-"
    return f"{v:.4f}" if abs(v) < 100 else f"{v:,.1f}"


def replace_between(document: str, begin: str, end: str, section: str) -> str:
    head, rest = document.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{section}\n{end}{tail}"


def write_section(begin: str, end: str, section: str) -> None:
    BENCHMARKS.write_text(replace_between(BENCHMARKS.read_text(), begin, end, section))


def put_section(begin: str, end: str, section: str) -> None:
    """Replace the section between its markers in BENCHMARKS.md, or append it with its markers the first time."""
    text = BENCHMARKS.read_text()
    if begin in text:
        BENCHMARKS.write_text(replace_between(text, begin, end, section))
    else:
        BENCHMARKS.write_text(f"{text.rstrip()}\n\n{begin}\n{section}\n{end}\n")


def render_main(begin: str, end: str, render: Callable[[], str]) -> None:
    """A renderer's command line: `--write` puts the section into BENCHMARKS.md; without it, it is printed."""
    if "--write" in sys.argv[1:]:
        put_section(begin, end, render())
    else:
        print(render())
