"""One finished penguins run per test process, shared by the serving tests (training it takes about 20 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.serving.penguins import train_run


@pytest.fixture(scope="session")
def penguins_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return train_run(tmp_path_factory.mktemp("penguins"))
