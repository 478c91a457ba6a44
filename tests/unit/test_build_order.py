"""hack/build_order.sh: `make test` builds the virtualenv and the images side by side when the disk holds both peaks,
the virtualenv first when it holds each but not both, and otherwise stops naming the room it needs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ORDER = REPO / "hack" / "build_order.sh"
IMAGES = REPO / "hack" / "images" / "build.sh"


def _decide(free: int, venv_cold: bool, images_cold: bool, stale: int) -> subprocess.CompletedProcess[str]:
    args = [str(free), str(int(venv_cold)), str(int(images_cold)), str(stale)]
    return subprocess.run([str(ORDER), "decide", *args], capture_output=True, text=True, check=False)


G = 1024  # MiB in a GiB: the script works in MiB, as the peaks were measured

# free MiB, virtualenv cold, images cold, MiB of stale trainer archives -> the order (None: refused)
CASES = [
    (50 * G, True, True, 0, "parallel"),
    (19 * G, True, True, 0, "parallel"),  # 11.4 + 7.4
    (16 * G, True, True, 3450, "parallel"),  # the stale archive (3.37 GiB) goes before the image build
    (16 * G, True, True, 0, "venv-first"),  # 7.35 kept + 7.4
    (15 * G, True, True, 0, "venv-first"),
    (14 * G, True, True, 0, None),  # 14.75 one after the other
    (12 * G, True, True, 3450, "venv-first"),  # the CI machine once refused: the virtualenv's 11.4 is the most
    (11 * G, True, True, 8 * G, None),
    (12 * G, True, False, 0, "parallel"),
    (11 * G, True, False, 0, None),
    (8 * G, False, True, 0, "parallel"),
    (7 * G, False, True, 0, None),
    (5 * G, False, True, 3450, "parallel"),
    (0, False, False, 0, "parallel"),  # nothing to build
]


@pytest.mark.parametrize(("free", "venv_cold", "images_cold", "stale", "order"), CASES)
def test_the_order_follows_the_room(
    free: int, venv_cold: bool, images_cold: bool, stale: int, order: str | None
) -> None:
    done = _decide(free, venv_cold, images_cold, stale)
    if order is None:
        assert done.returncode == 1 and done.stdout == ""
        assert f"GiB free under {Path.cwd()}; {free / G:.1f} GiB free there." in done.stderr
        assert "TABJOB_SKIP_DISK_CHECK=1" in done.stderr
    else:
        assert (done.returncode, done.stdout.strip(), done.stderr) == (0, order, "")


def test_a_refusal_names_what_needs_the_room() -> None:
    assert "the virtualenv (.venv) and then the images, one after the other, needs about 14.8 GiB" in (
        _decide(14 * G, True, True, 0).stderr
    )
    assert "a new virtualenv (.venv) needs about 11.4 GiB" in _decide(11 * G, True, False, 0).stderr
    assert "the trainer image build needs about 4.0 GiB" in _decide(3 * G, False, True, 3450).stderr


def test_stale_trainer_archives_are_counted_and_the_current_one_is_not(tmp_path: Path) -> None:
    env = {**os.environ, "TABJOB_IMAGE_CACHE": str(tmp_path)}

    def stale_gib() -> float:
        done = subprocess.run([str(IMAGES), "--stale-mib"], capture_output=True, text=True, env=env, check=True)
        return int(done.stdout) / 1024

    assert stale_gib() == 0
    lines = subprocess.run([str(IMAGES), "--print"], capture_output=True, text=True, env=env, check=False).stdout
    current = Path(next(line.split()[1] for line in lines.splitlines() if "tabjob-trainer" in line))
    # Sparse files: their sizes count, their blocks are never written.
    with current.open("wb") as f:
        f.truncate(5 << 30)
    assert stale_gib() == 0
    for name, gib in (("tabjob-trainer-0.1.0-cpu-0000000000000000", 4), ("tabjob-trainer-0.0.9-cpu-1111", 3)):
        with (tmp_path / f"{name}.oci.tar").open("wb") as f:
            f.truncate(gib << 30)
    (tmp_path / "tabjob-operator-0.1.0-2222.oci.tar").write_bytes(b"not a trainer")
    assert stale_gib() == 7
