"""The house's map, enforced: docs/architecture.md's table places every product module and says what it may import
(tests/unit/house_map.py reads it), the docs name every module, and the control side never imports torch/lightgbm
(the trainer's side, which needs them installed, is checked in tests/trainer/test_trainer_imports.py)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

from tests.unit import house_map

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"


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


def _readme_layout() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Layout")
    return text[start : text.index("\n## ", start + 1)]


def test_every_import_follows_its_row_of_the_architecture_table() -> None:
    # The map in docs/architecture.md is the rule: each product module sits in a row, imports only what its row lists
    # (at import time, or inside a function where the row says so), and rows list only rows above them.
    text = ARCHITECTURE.read_text()
    rows = house_map.rows(text)
    assert len(rows) >= 12 and house_map.guarded_libraries(text) >= {"kopf", "kubernetes"}  # the table was read
    wrong = house_map.violations(ROOT, text)
    assert wrong == [], "\n".join(wrong)


def test_the_table_keeps_the_house_rules() -> None:
    # Loosening a row to let a violation through would also loosen one of these; they are the house's own rules.
    rows = {r.paths[0].removeprefix("operator/tabjob/"): r for r in house_map.rows(ARCHITECTURE.read_text())}
    leaves = ("families/", "contracts/pod.py")
    assert all(not rows[leaf].eager and not rows[leaf].lazy and not rows[leaf].libraries for leaf in leaves)
    policy, config = rows["controller/policy/"], rows["controller/__init__.py"]
    assert not any("controller/runtime" in p for p in (*policy.eager, *policy.lazy))
    assert not any("controller/" in p for p in (*config.eager, *config.lazy))
    trainer = rows["trainer/tabjob_trainer/"]
    assert not (trainer.libraries | trainer.lazy_libraries) & {"kopf", "kubernetes"}
    assert not any(p.startswith("trainer/") for p in rows["cli/"].eager)  # the trainer only inside a verb


def test_the_check_sees_a_wrong_arrow_and_an_unplaced_module(tmp_path: Path) -> None:
    # The checker itself, on a house of three modules: a leaf importing upward, and a module no row places.
    table = "| folder | its job | may import |\n| --- | --- | --- |\n"
    table += "| `operator/tabjob/leaf/` | a leaf | nothing of tabjob |\n"
    table += "| `operator/tabjob/top/` | above nothing | `leaf/`; inside a function: `kopf` |\n"
    (tmp_path / "trainer" / "tabjob_trainer").mkdir(parents=True)
    for folder, body in {"leaf": "from tabjob.top import x\n", "top": "def f():\n    import kopf\n"}.items():
        (tmp_path / "operator" / "tabjob" / folder).mkdir(parents=True)
        (tmp_path / "operator" / "tabjob" / folder / "__init__.py").write_text(body)
    (tmp_path / "operator" / "tabjob" / "__init__.py").write_text("")
    (tmp_path / "operator" / "tabjob" / "loose.py").write_text("import kopf\n")
    found = house_map.violations(tmp_path, table)
    assert found == [
        "operator/tabjob/__init__.py: no row of docs/architecture.md's table places it",
        "operator/tabjob/leaf/__init__.py imports tabjob.top (operator/tabjob/top/__init__.py) at import time: "
        "its row ('operator/tabjob/leaf/',) does not allow it",
        "operator/tabjob/loose.py: no row of docs/architecture.md's table places it",
    ]


def test_readme_layout_and_architecture_name_every_module() -> None:
    # A module the map does not name is one a newcomer cannot find: each file (by its name, or its folder and name
    # where the name is not unique) and each package appears in docs/architecture.md or README's "Layout".
    tokens = house_map.doc_tokens(ARCHITECTURE.read_text(), _readme_layout())
    missing = house_map.unlisted(ROOT, tokens)
    assert missing == [], "name these in docs/architecture.md: " + ", ".join(missing)


def test_no_product_module_is_over_450_lines() -> None:
    # A newcomer reads the house in an hour only if no file is a house of its own.
    sources = [*(ROOT / "operator" / "tabjob").rglob("*.py"), *(ROOT / "trainer" / "tabjob_trainer").rglob("*.py")]
    assert len(sources) > 50  # both packages were found
    long = {str(p.relative_to(ROOT)): n for p in sources if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}
