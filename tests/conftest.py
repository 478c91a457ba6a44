"""Shared test set-up: the local control plane's fixtures (tests/cluster) for the e2e tests."""

import importlib.util

# The cluster fixtures start (or reuse) a real control plane only when a test asks for them.
if importlib.util.find_spec("tests.cluster.fixtures") is not None:
    pytest_plugins = ["tests.cluster.fixtures"]
