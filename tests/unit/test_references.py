"""What the repository's own files point at exists: every test file a document, comment or manifest names, and
every phony target the Makefiles declare (a name left behind by a renamed test or target misleads the reader)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = (".py", ".md", ".yaml", ".yml", ".mk", ".tpl", ".sh", ".toml", ".txt", "Makefile", "Dockerfile")


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.splitlines() if p.endswith(TEXT) and (ROOT / p).is_file()]


def test_every_test_file_named_in_the_repository_exists() -> None:
    named = re.compile(r"\btests/[\w/]+\.py\b")
    missing = sorted(
        f"{path.relative_to(ROOT)}: {ref}"
        for path in _tracked()
        for ref in set(named.findall(path.read_text(errors="replace")))
        if not (ROOT / ref).is_file()
    )
    assert missing == []


def test_every_phony_target_is_defined() -> None:
    makefiles = [ROOT / "Makefile", *sorted(p for p in _tracked() if p.suffix == ".mk")]
    text = "\n".join(p.read_text() for p in makefiles)
    phony = {name for line in re.findall(r"^\.PHONY:(.*)$", text, re.MULTILINE) for name in line.split()}
    defined = set(re.findall(r"^([\w.-]+)\s*:(?!=)", text, re.MULTILINE))
    assert phony and phony <= defined, sorted(phony - defined)
