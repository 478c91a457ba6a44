"""hack/images/build.sh on an empty cache, as on a fresh machine: the base image (mmdebstrap from Debian's
archive, about a minute) is built, archived and named, and a second run builds nothing. A first build on an empty
cache once ended with a bare exit 2 (pruning older archives when there were none), which no warm run could see, and
once refused to start on a machine with 7 GiB free because it asked for the trainer's 8 GiB though it builds only the
base: here `df` reports 3 GiB free, which is room for the base and not for the trainer."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hack.images import oci_run

BUILD = Path(__file__).resolve().parents[2] / "hack" / "images" / "build.sh"
CANNOT_BUILD = oci_run.missing_tools()
pytestmark = pytest.mark.skipif(bool(CANNOT_BUILD), reason=str(CANNOT_BUILD))


def _with_free_gib(tmp_path: Path, gib: int) -> str:
    """A PATH whose `df` reports GIB free (in `df -Pk`'s format), ahead of the real one."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    df = bin_dir / "df"
    kib = gib * 1024 * 1024
    df.write_text(
        "#!/bin/sh\n"
        "echo 'Filesystem 1024-blocks Used Available Capacity Mounted on'\n"
        f"echo 'fake {2 * kib} {kib} {kib} 50% /'\n"
    )
    df.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def _base(cache: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TABJOB_IMAGE_CACHE": str(cache),
        "TABJOB_SKIP_DISK_CHECK": "0",
        "PATH": _with_free_gib(cache.parent, 3),
    }
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


def test_a_full_build_without_the_trainers_room_stops_before_building_anything(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "TABJOB_IMAGE_CACHE": str(cache),
        "TABJOB_SKIP_DISK_CHECK": "0",
        "PATH": _with_free_gib(tmp_path, 3),
    }
    # A trainer archive of another key: the build removes it before it asks for room (it never needs it again).
    cache.mkdir()
    with (cache / "tabjob-trainer-0.1.0-cpu-0000000000000000.oci.tar").open("wb") as f:
        f.truncate(4 << 30)
    full = subprocess.run([str(BUILD)], env=env, capture_output=True, text=True, timeout=300)
    assert full.returncode == 1
    assert "the trainer image build" in full.stderr and "3.0 GiB free" in full.stderr
    assert "building" not in full.stderr and not list(cache.glob("*.oci.tar"))
