"""The built images run as a restricted pod runs them (hack/images/oci_run.py: runc, read-only root, tmpfs /tmp).

Skipped with the reason when `make images` has not built them or this machine cannot run them (root, buildah,
runc); `make test` builds them before pytest starts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tabjob
from hack.images import oci_run

IMAGES, NOT_BUILT = oci_run.built_images()
CANNOT_RUN = oci_run.missing_tools()
pytestmark = pytest.mark.skipif(bool(NOT_BUILT or CANNOT_RUN), reason=str(NOT_BUILT or CANNOT_RUN))

OPERATOR = f"ghcr.io/tabjob/tabjob-operator:{tabjob.__version__}"
TRAINER = f"ghcr.io/tabjob/tabjob-trainer:{tabjob.__version__}-cpu"


@pytest.fixture(scope="module")
def operator_image() -> Iterator[oci_run.Mounted]:
    with oci_run.mounted(IMAGES[OPERATOR]) as image:
        yield image


@pytest.fixture(scope="module")
def trainer_image() -> Iterator[oci_run.Mounted]:
    with oci_run.mounted(IMAGES[TRAINER]) as image:
        yield image


def test_build_names_the_charts_images() -> None:
    # KServe's storage initializer is the test bed's, for the storage e2e (hack/images/storage-initializer.Dockerfile).
    initializer = "localhost/kserve/storage-initializer:0.21.0"
    assert {OPERATOR, TRAINER, "localhost/tabjob/python-base:bookworm", initializer} == set(IMAGES)
    assert all(i.archive.is_absolute() for i in IMAGES.values())


def test_operator_reports_its_version_as_nonroot(operator_image: oci_run.Mounted) -> None:
    assert operator_image.user == (65532, 65532)
    assert operator_image.config["Entrypoint"] == ["tabjob"]
    result = oci_run.run(operator_image, ["tabjob", "--version"])
    assert result.returncode == 0, result.stderr
    assert tabjob.__version__ in result.stdout


def test_image_users_have_names(operator_image: oci_run.Mounted, trainer_image: oci_run.Mounted) -> None:
    # kopf names its identity after getpass.getuser(): an unnamed uid crash-looped the chart's operator pods.
    for image, name, imports in ((operator_image, "nonroot", ""), (trainer_image, "tabjob", "s3fs, gcsfs")):
        script = f"import getpass{', ' + imports if imports else ''}; print(getpass.getuser())"
        result = oci_run.run(image, ["python", "-c", script])
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == name


def test_operator_image_has_no_trainer_libraries(operator_image: oci_run.Mounted) -> None:
    probe = "import importlib.util as u; print([m for m in ('torch', 'lightgbm') if u.find_spec(m)])"
    result = oci_run.run(operator_image, ["python", "-c", probe])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_trainer_imports_and_fits_on_a_read_only_root(trainer_image: oci_run.Mounted) -> None:
    assert trainer_image.user == (1000, 1000)
    # One CPU step of each library, with HOME=/tmp (the image's) as the only writable place.
    script = (
        "import os, tabjob_trainer, torch, lightgbm, numpy as np\n"
        "torch.nn.Linear(4, 1)(torch.ones(2, 4)).sum().backward()\n"
        "lightgbm.train({'verbose': -1}, lightgbm.Dataset(np.random.rand(64, 4), np.random.rand(64)), 2)\n"
        "open(os.path.join(os.environ['HOME'], 'probe'), 'w').write('ok')\n"
        "print(os.getuid(), os.environ['HOME'], torch.cuda.is_available())\n"
    )
    result = oci_run.run(trainer_image, ["python", "-c", script])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1000", "/tmp", "False"]


def test_trainer_root_filesystem_is_read_only(trainer_image: oci_run.Mounted) -> None:
    result = oci_run.run(trainer_image, ["python", "-c", "open('/opt/venv/probe', 'w')"])
    assert result.returncode != 0
    assert "Read-only file system" in result.stderr


def test_trainer_entry_point_runs(trainer_image: oci_run.Mounted) -> None:
    assert trainer_image.config["Entrypoint"] == ["torchrun"]
    assert trainer_image.config["Cmd"][-2:] == ["-m", "tabjob_trainer"]
    result = oci_run.run(trainer_image, ["torchrun", "--help"])
    assert result.returncode == 0, result.stderr
    assert "--nproc-per-node" in result.stdout
