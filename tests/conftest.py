"""Shared test set-up: the local control plane's fixtures (tests/cluster) for the e2e tests."""

import importlib.util
from pathlib import Path

import pytest

CLUSTER_TESTS = Path(__file__).parent / "cluster"

# The cluster fixtures start (or reuse) a real control plane only when a test asks for them.
if importlib.util.find_spec("tests.cluster.fixtures") is not None:
    pytest_plugins = ["tests.cluster.fixtures"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`make test` runs two workers), every test that touches the local cluster goes to one
    worker, so one cluster serves them all, one test at a time as they were written; the other tests go file by file,
    so a module's expensive fixture is built once."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        on_cluster = Path(str(item.path)).is_relative_to(CLUSTER_TESTS) or "cluster" in fixtures
        group = "cluster" if on_cluster else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
