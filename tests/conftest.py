"""Shared test set-up: the local control plane's fixtures (tests/cluster) for the e2e tests, and how `make test`'s
pytest-xdist workers share the work."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

# Every test that needs the local cluster lives under one of these (collection checks it below).
CLUSTER_DIRS = ("chaos", "chart", "cluster", "e2e")

# The cluster fixtures start (or reuse) a real control plane only when a test asks for them.
pytest_plugins = ["tests.s3fixtures"]
if importlib.util.find_spec("tests.cluster.fixtures") is not None:
    pytest_plugins.append("tests.cluster.fixtures")


def on_cluster_side(nodeid: str) -> bool:
    parts = nodeid.split("/")
    return len(parts) > 2 and parts[0] == "tests" and parts[1] in CLUSTER_DIRS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    strays = [i.nodeid for i in items if "cluster" in getattr(i, "fixturenames", ()) and not on_cluster_side(i.nodeid)]
    if strays:
        raise pytest.UsageError(
            f"tests using the cluster fixture must live under tests/{{{','.join(CLUSTER_DIRS)}}} (one xdist worker "
            f"runs those, against one cluster): {', '.join(strays)}"
        )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test` runs two workers: every test on the cluster goes to one of them, in order, against one cluster
    and one operator as they were written; the other tests go file by file, so a module's fixture is built once."""
    from xdist.scheduler import LoadScopeScheduling

    class ClusterOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "cluster" if on_cluster_side(nodeid) else nodeid.split("::", 1)[0]

    return ClusterOnOneWorker(config, log)
