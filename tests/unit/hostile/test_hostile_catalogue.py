"""The hostile-input catalogue: every file in cases/ is refused by `tabjob validate` with its one-line error.

expected.yaml maps each case to (a substring of) the line that must follow ``FILE: ``. The cases are what a hostile
or careless user tried: coerced types, duplicate keys, NaN and Inf, binary files, numbers past any pod, lists past
the CRD's maxItems, names no Service or pod accepts, host mounts, and plans past the objects that would carry them.
"""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
import yaml

from tabjob.cli.validate import problems_of

HERE = Path(__file__).parent
CASES = HERE / "cases"
EXPECTED: dict[str, str] = yaml.safe_load((HERE / "expected.yaml").read_text())
ROOT = HERE.parents[2]


def test_catalogue_and_expectations_match() -> None:
    assert sorted(p.name for p in CASES.iterdir()) == sorted(EXPECTED)
    assert len(EXPECTED) >= 70


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_refused_with_its_line(name: str) -> None:
    path = str(CASES / name)
    problems, summaries = problems_of(path)
    assert summaries == [], f"{name} was accepted"
    assert all(line.startswith(f"{path}: ") and "\n" not in line for line in problems)
    assert any(EXPECTED[name] in line for line in problems), problems


@pytest.mark.parametrize(
    "name", ["binary.png", "latin1.yaml", "gpus-inf.yaml", "duplicate-key.yaml", "2000000-fits.yaml", "alias-bomb.yaml"]
)
def test_cli_gives_one_line_and_no_traceback(name: str) -> None:
    for verb in ("validate", "plan"):
        out = subprocess.run(
            [sys.executable, "-m", "tabjob", verb, str(CASES / name)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert out.returncode == 1, (verb, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr and EXPECTED[name] in out.stderr, (verb, out.stderr)


def test_a_huge_plan_is_refused_before_its_fits_exist() -> None:
    # 2,000,000 fits once took 49 s and 3.4 GB; the count is now arithmetic, checked before any fit is built.
    tracemalloc.start()
    try:
        problems, _ = problems_of(str(CASES / "2000000-fits.yaml"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert any("2000000 fits" in line for line in problems)
    assert peak < 20 * 2**20, f"validate used {peak / 2**20:.0f} MiB"
