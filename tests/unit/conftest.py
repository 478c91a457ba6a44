"""tests/unit runs in two virtualenvs: `make test`'s, with the trainer's libraries, and `make test-unit`'s, with the
control side alone (no numpy, pandas or LightGBM, so it installs in a minute). The modules below import those
libraries (the bench's renderers read results through the trainer's records), so where they are missing they are
left out and pytest's header names them (without -q): `make test` runs them."""

from __future__ import annotations

import importlib.util

NEEDS_TRAINER_LIBRARIES = [
    "test_benchmarks_md.py",
    "test_rank_busy.py",
    "test_repeated_runs.py",
]
MISSING = [name for name in ("numpy", "pandas", "lightgbm") if importlib.util.find_spec(name) is None]
collect_ignore = NEEDS_TRAINER_LIBRARIES if MISSING else []


def pytest_report_header() -> str | None:
    if not MISSING:
        return None
    left = ", ".join(NEEDS_TRAINER_LIBRARIES)
    return f"tests/unit: {left} left out here ({', '.join(MISSING)} missing; make test runs them)"
