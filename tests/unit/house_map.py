"""The house's map, read off docs/architecture.md, and the code held to it (tests/unit/test_import_boundaries.py).

The table "| folder | its job | may import |" has one row per place. Its first cell names the place by repository
paths in backticks (a folder ends with ``/``); a product module (under ``operator/tabjob/`` or
``trainer/tabjob_trainer/``) belongs to the row with the longest path that holds it, and one that no row holds is an
error. The last cell says what the row may import, split by ``;`` into clauses:

- backticked paths (``api/``, ``contracts/pod.py``), each the end of exactly one row's path: modules of tabjob under
  that path may be imported anywhere in the file;
- backticked bare names (``kopf``): third-party libraries that only the rows naming them may import;
- a clause starting "inside a function": its names may be imported only inside a function (not at import time);
- a clause starting "never", or prose without backticks: documentation only (what is not listed is refused).

A row may import its own modules, and only rows above it: the arrows point one way, up the table.
``from tabjob import __version__`` is no arrow (a constant the package defines before it imports anything).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

PRODUCT = ("operator/tabjob/", "trainer/tabjob_trainer/")
HEADER = re.compile(r"^\|\s*folder\s*\|\s*its job\s*\|\s*may import\s*\|\s*$")
TICKED = re.compile(r"`([^`]+)`")
LIBRARY = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass(frozen=True)
class Row:
    index: int
    paths: tuple[str, ...]
    eager: tuple[str, ...]  # resolved repository paths this row may import at any depth
    lazy: tuple[str, ...]  # ... only inside a function
    libraries: frozenset[str]
    lazy_libraries: frozenset[str]


def table(text: str) -> list[tuple[str, str]]:
    """The (folder, may import) cells of the map's table, in order."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if HEADER.match(line))
    cells = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        parts = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(parts) == 3, f"a row of the map's table has {len(parts)} cells, not 3: {line}"
        cells.append((parts[0], parts[2]))
    return cells


def rows(text: str) -> list[Row]:
    """The product rows of the table, their "may import" cells resolved to paths."""
    raw = []
    for folder, may in table(text):
        paths = tuple(TICKED.findall(folder))
        product = [p for p in paths if p.startswith(PRODUCT)]
        assert not product or len(product) == len(paths), f"a row mixes product and other paths: {folder}"
        if product:
            raw.append((paths, may))
    every = [p for paths, _ in raw for p in paths]

    def resolve(token: str) -> str:
        found = [p for p in every if p == token or p.endswith("/" + token)]
        assert len(found) == 1, f"`{token}` in the map's 'may import' names {found or 'no row'}, not one row"
        return found[0]

    out = []
    for index, (paths, may) in enumerate(raw):
        eager: list[str] = []
        lazy: list[str] = []
        libs: set[str] = set()
        lazy_libs: set[str] = set()
        for clause in may.split(";"):
            words = clause.strip().lower()
            if words.startswith("never"):
                continue
            inside = words.startswith("inside a function")
            for token in TICKED.findall(clause):
                if LIBRARY.match(token):
                    (lazy_libs if inside else libs).add(token)
                else:
                    (lazy if inside else eager).append(resolve(token))
        out.append(Row(index, paths, tuple(eager), tuple(lazy), frozenset(libs), frozenset(lazy_libs)))
    return out


def guarded_libraries(text: str) -> set[str]:
    """Every library a 'may import' cell names: only the rows naming one may import it."""
    return {t for _, may in table(text) for t in TICKED.findall(may) if LIBRARY.match(t)}


def modules(root: Path) -> dict[str, str]:
    """Every product module's dotted name -> its repository path."""
    found = {}
    for top in PRODUCT:
        base = root / top
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            parts = path.relative_to(base.parent).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = rel
    return found


def place(path: str, table_rows: list[Row]) -> Row | None:
    """The row holding a module: the one with the longest path that is the module or a folder above it."""
    best: tuple[int, Row] | None = None
    for row in table_rows:
        for p in row.paths:
            if (p == path or (p.endswith("/") and path.startswith(p))) and (best is None or len(p) > best[0]):
                best = (len(p), row)
    return best[1] if best else None


def imports(source: str, name: str, is_package: bool, known: dict[str, str]) -> list[tuple[str, bool]]:
    """(what a module imports, whether inside a function): tabjob modules by dotted name, others by top name."""
    tree = ast.parse(source)
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        lazy = id(node) in inside
        if isinstance(node, ast.Import):
            found += [(a.name, lazy) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if base == "tabjob" and alias.name == "__version__":
                    continue
                full = f"{base}.{alias.name}"
                found.append((full if full in known else base, lazy))
    return found


def violations(root: Path, text: str) -> list[str]:
    """Every way the code under ``root`` breaks the map in ``text``: unplaced modules and arrows the map lacks."""
    table_rows = rows(text)
    problems = []
    for row in table_rows:
        for allowed in (*row.eager, *row.lazy):
            if allowed in row.paths:
                problems.append(f"row {row.paths} lists itself")
            held = [r for r in table_rows if any(p.startswith(allowed) for p in r.paths)]
            below = [r.paths for r in held if r.index >= row.index]
            if below:
                problems.append(f"row {row.paths} may import `{allowed}`, which holds rows not above it: {below}")
    guarded = guarded_libraries(text)
    known = modules(root)
    for name, path in known.items():
        placed = place(path, table_rows)
        if placed is None:
            problems.append(f"{path}: no row of docs/architecture.md's table places it")
            continue
        row = placed
        for target, lazy in imports((root / path).read_text(), name, path.endswith("__init__.py"), known):
            top = target.partition(".")[0]
            if top in guarded:
                if top not in row.libraries and not (lazy and top in row.lazy_libraries):
                    problems.append(f"{path} imports {target}{' inside a function' if lazy else ''}: not in its row")
                continue
            if target not in known:
                continue  # a library the map does not guard
            to = known[target]
            if place(to, table_rows) is row or any(to.startswith(p) for p in row.eager):
                continue
            if lazy and any(to.startswith(p) for p in row.lazy):
                continue
            where = "inside a function" if lazy else "at import time"
            problems.append(f"{path} imports {target} ({to}) {where}: its row {row.paths} does not allow it")
    return sorted(set(problems))


def doc_tokens(*texts: str) -> set[str]:
    """Names the docs give: backticked spans and the words of code blocks, split on spaces and punctuation."""
    tokens: set[str] = set()
    for text in texts:
        blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
        spans = TICKED.findall(re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)) + blocks
        for span in spans:
            tokens.update(w.strip(".,;:()'\"") for w in re.split(r"[\s,]+", span))
    return {t for t in tokens if t}


def unlisted(root: Path, tokens: set[str]) -> list[str]:
    """Product modules and packages the docs name nowhere (a name counts when it is one module's, or its path's end)."""
    paths = list(modules(root).values())
    folders = sorted({p.rpartition("/")[0] + "/" for p in paths if p.endswith("/__init__.py")})

    def named(path: str, candidates: list[str], suffix: str) -> bool:
        """Some token ends with the name and names this one path only."""
        return any(
            t.endswith(suffix) and [c for c in candidates if c == t or c.endswith("/" + t)] == [path] for t in tokens
        )

    files = [p for p in paths if not p.endswith(("/__init__.py", "/__main__.py"))]
    missing = [p for p in files if not named(p, files, ".py")]
    missing += [f for f in folders if not named(f, folders, "/")]
    return missing
