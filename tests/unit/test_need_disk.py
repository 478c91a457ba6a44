"""hack/need_disk.sh: a cold build short of room stops before writing anything, naming what needs it and where."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "need_disk.sh"


def _run(gib: float, where: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), str(gib), str(where), "the widget"],
        capture_output=True,
        text=True,
        env={**os.environ, "TABJOB_SKIP_DISK_CHECK": "0", **env},
        check=False,
    )


def test_enough_room_passes_quietly(tmp_path: Path) -> None:
    done = _run(0, tmp_path)
    assert (done.returncode, done.stderr) == (0, "")


def test_short_of_room_names_what_where_and_the_free_space(tmp_path: Path) -> None:
    done = _run(1_000_000, tmp_path)  # a million GiB: no test machine has it
    assert done.returncode == 1
    first = done.stderr.splitlines()[0]
    assert f"the widget needs about 1000000 GiB free under {tmp_path}" in first
    assert "GiB free there" in first


def test_a_need_with_a_decimal_counts_in_mib(tmp_path: Path) -> None:
    free_mib = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize // 2**20
    assert _run(max(free_mib - 200, 0) / 1024, tmp_path).returncode == 0
    short = _run((free_mib + 200) / 1024, tmp_path)
    assert short.returncode == 1 and "GiB free there" in short.stderr


def test_the_check_can_be_skipped(tmp_path: Path) -> None:
    assert _run(1_000_000, tmp_path, TABJOB_SKIP_DISK_CHECK="1").returncode == 0
