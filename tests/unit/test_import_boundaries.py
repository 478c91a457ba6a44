"""The control side never imports torch/lightgbm (the trainer's side, which needs them installed, is checked in
tests/trainer/test_trainer_imports.py); the layers point one way; the pod contract is a leaf."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules(package_dir: Path, name: str) -> list[str]:
    """Every module of a package except ``__main__`` entry points (they run, not import)."""
    found = [m.name for m in pkgutil.walk_packages([str(package_dir)], f"{name}.")]
    return [name] + [m for m in found if not m.endswith("__main__")]


def _loaded_after_import(modules: list[str], forbidden: list[str]) -> list[str]:
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        f"print(','.join(sorted(f for f in {forbidden!r} if f in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return [m for m in out.stdout.strip().split(",") if m]


def test_control_side_is_free_of_torch_and_lightgbm() -> None:
    modules = _modules(ROOT / "operator" / "tabjob", "tabjob")
    assert "tabjob.cli.plan" in modules
    assert _loaded_after_import(modules, ["torch", "lightgbm"]) == []


def test_no_importable_package_named_operator() -> None:
    code = "import operator, sys; print(operator.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "lib/python" in out.stdout and "/operator/" not in out.stdout.replace("operator.py", "")
    assert not (ROOT / "operator" / "__init__.py").exists()


def _imports(path: Path) -> set[str]:
    """Every tabjob module a file imports, at any depth of the file (imports inside functions included)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tabjob"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tabjob"))
    return found


def test_controller_layers_point_one_way_runtime_to_policy_to_config() -> None:
    controller = ROOT / "operator" / "tabjob" / "controller"
    upward = {
        "policy": ("tabjob.controller.runtime",),
        "config": ("tabjob.controller.runtime", "tabjob.controller.policy"),
    }
    wrong = []
    for layer, forbidden in upward.items():
        files = [controller / "config.py"] if layer == "config" else sorted((controller / layer).glob("*.py"))
        assert files
        for path in files:
            wrong += [f"{path.relative_to(ROOT)} imports {m}" for m in _imports(path) if m.startswith(forbidden)]
    assert wrong == [], "\n".join(wrong)


def test_the_pod_contract_is_a_leaf_both_sides_can_import() -> None:
    # The trainer, serving and the builders all read contracts/; it imports nothing of tabjob but the version.
    contracts = sorted((ROOT / "operator" / "tabjob" / "contracts").glob("*.py"))
    assert contracts
    imported = {m for path in contracts for m in _imports(path)}
    assert imported <= {"tabjob", "tabjob.__version__"}, imported


def test_no_product_module_is_over_450_lines() -> None:
    # A newcomer reads the house in an hour only if no file is a house of its own.
    sources = [*(ROOT / "operator" / "tabjob").rglob("*.py"), *(ROOT / "trainer" / "tabjob_trainer").rglob("*.py")]
    assert len(sources) > 50  # both packages were found
    long = {str(p.relative_to(ROOT)): n for p in sources if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}
