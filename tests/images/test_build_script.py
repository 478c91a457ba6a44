"""hack/images/build.sh on an empty cache, as on a fresh machine: the base image (mmdebstrap from Debian's
archive, about a minute) is built, archived and named, and a second run builds nothing. A first build on an empty
cache once ended with a bare exit 2 (pruning older archives when there were none), which no warm run could see."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hack.images import oci_run

BUILD = Path(__file__).resolve().parents[2] / "hack" / "images" / "build.sh"
CANNOT_BUILD = oci_run.missing_tools()
pytestmark = pytest.mark.skipif(bool(CANNOT_BUILD), reason=str(CANNOT_BUILD))


def _base(cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TABJOB_IMAGE_CACHE": str(cache)}
    return subprocess.run([str(BUILD), "--base"], env=env, capture_output=True, text=True, timeout=900)


def test_an_empty_cache_builds_the_base_once(tmp_path: Path) -> None:
    first = _base(tmp_path / "cache")
    assert first.returncode == 0, first.stderr
    ref, archive = first.stdout.split()
    assert ref == "localhost/tabjob/python-base:bookworm"
    assert Path(archive).parent == tmp_path / "cache" and Path(archive).stat().st_size > 10_000_000
    assert "building" in first.stderr

    second = _base(tmp_path / "cache")
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout and "building" not in second.stderr
