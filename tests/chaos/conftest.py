"""Chaos runs: bounded and self-stopping, but minutes long, so they run only when asked for: `pytest -m chaos`."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import crd, trainer_image  # noqa: F401 - the CRD installed, the trainer image on every node


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: faults injected on the local control plane (run with -m chaos)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "chaos" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="a chaos run takes minutes: select it with `pytest -m chaos`")
    for item in items:
        if item.get_closest_marker("chaos"):
            item.add_marker(skip)
