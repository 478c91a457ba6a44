"""The trainer's side of the import boundaries, which needs the trainer's libraries installed (the control side's
are in tests/unit, whose virtualenv has none of them): the trainer never imports kopf or kubernetes, and the trainer
image's entry point exists."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

from tests.unit.test_dockerfile import _exec_form
from tests.unit.test_import_boundaries import ROOT, _loaded_after_import, _modules


def test_trainer_is_free_of_kopf_and_kubernetes() -> None:
    modules = _modules(ROOT / "trainer" / "tabjob_trainer", "tabjob_trainer")
    assert _loaded_after_import(modules, ["kopf", "kubernetes"]) == []


def test_trainer_entry_point_exists() -> None:
    entry, cmd = _exec_form("trainer", "ENTRYPOINT"), _exec_form("trainer", "CMD")
    assert entry == ["torchrun"]
    assert shutil.which("torchrun", path=str(Path(sys.executable).parent)), "torchrun is not installed"
    module = cmd[cmd.index("-m") + 1]
    # torchrun -m runs the package's __main__; the operator's pods use the same module (builders.py).
    assert importlib.util.find_spec(f"{module}.__main__") is not None, f"{module} has no __main__"
    from tabjob.controller.policy import builders

    assert module in Path(builders.__file__).read_text(), "the operator's pods run another module than the image"
