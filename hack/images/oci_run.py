"""Runs a command from a built image under runc the way a restricted pod runs it.

Read-only root filesystem, a tmpfs on /tmp, the image's own numeric user, no network, the image's environment:
what the chart's securityContext asks of a node. The images come from hack/images/build.sh, whose output lines
(`<ref> <oci-archive>`) are the only interface; buildah's layer store under the same cache holds the unpacked
images, so a test does not unpack gigabytes of archive again when the archive's image id is already there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "images" / "build.sh"


@dataclass(frozen=True)
class BuiltImage:
    ref: str
    archive: Path


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


def parse_lines(text: str) -> dict[str, BuiltImage]:
    """build.sh's stdout, one `<ref> <absolute archive path>` per line, by ref."""
    images: dict[str, BuiltImage] = {}
    for line in text.splitlines():
        ref, _, path = line.strip().partition(" ")
        if ref and path:
            images[ref] = BuiltImage(ref, Path(path))
    return images


def built_images() -> tuple[dict[str, BuiltImage], str | None]:
    """The images build.sh names, and why they cannot be used (None when every archive exists)."""
    proc = subprocess.run([str(BUILD_SCRIPT), "--print"], capture_output=True, text=True)
    images = parse_lines(proc.stdout)
    missing = [str(i.archive) for i in images.values() if not i.archive.is_file()]
    if proc.returncode != 0 or missing or not images:
        return images, f"images not built (run `make images`): missing {', '.join(missing) or proc.stderr.strip()}"
    return images, None


def cache_dir() -> Path:
    return Path(os.environ.get("TABJOB_IMAGE_CACHE", str(Path.home() / ".cache" / "tabjob" / "images")))


def _buildah(*args: str) -> str:
    cache = cache_dir()
    cmd = ["buildah", "--root", str(cache / "storage"), "--runroot", str(cache / "run"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _image_source(image: BuiltImage) -> str:
    """The image id in the layer store when the archive's id is there, else the archive itself."""
    id_file = image.archive.with_name(image.archive.name + ".id")
    if id_file.is_file():
        image_id = id_file.read_text().strip()
        try:
            _buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}", image_id)
            return image_id
        except RuntimeError:
            pass
    return f"oci-archive:{image.archive}"


@dataclass(frozen=True)
class Mounted:
    rootfs: Path
    config: dict[str, Any]  # the image's OCI config: User, Env, Entrypoint, Cmd, WorkingDir

    @property
    def user(self) -> tuple[int, int]:
        uid, _, gid = str(self.config.get("User", "")).partition(":")
        if not uid.isdigit():
            raise ValueError(f"image user {self.config.get('User')!r} is not numeric (runAsNonRoot needs a uid)")
        return int(uid), int(gid or uid)


@contextmanager
def mounted(image: BuiltImage) -> Iterator[Mounted]:
    ctr = _buildah("from", "--name", f"tabjob-test-{uuid.uuid4().hex[:8]}", _image_source(image))
    try:
        rootfs = Path(_buildah("mount", ctr))
        config = json.loads(_buildah("inspect", "--type", "container", ctr))["OCIv1"]["config"]
        yield Mounted(rootfs, config)
    finally:
        _buildah("rm", ctr)


def runc_config(template: dict[str, Any], image: Mounted, args: list[str], user: tuple[int, int]) -> dict[str, Any]:
    """runc's default spec made into a restricted pod's container: read-only root, tmpfs /tmp, given user."""
    config = json.loads(json.dumps(template))
    config["root"] = {"path": str(image.rootfs), "readonly": True}
    process = config["process"]
    process["terminal"] = False
    process["args"] = args
    process["env"] = list(image.config.get("Env") or [])
    process["cwd"] = image.config.get("WorkingDir") or "/"
    process["user"] = {"uid": user[0], "gid": user[1]}
    process["noNewPrivileges"] = True
    config["mounts"].append(
        {
            "destination": "/tmp",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "nodev", "mode=1777", "size=512m"],
        }
    )
    return config


def run(image: Mounted, args: list[str], user: tuple[int, int] | None = None, timeout: float = 300) -> Result:
    """Runs args in the mounted image under runc and returns what it printed."""
    with tempfile.TemporaryDirectory(prefix="tabjob-runc-") as tmp:
        bundle = Path(tmp)
        subprocess.run(["runc", "spec", "--bundle", str(bundle)], check=True, capture_output=True)
        template = json.loads((bundle / "config.json").read_text())
        config = runc_config(template, image, args, user or image.user)
        (bundle / "config.json").write_text(json.dumps(config))
        state = bundle / "state"
        name = f"tabjob-test-{uuid.uuid4().hex[:8]}"
        proc = subprocess.run(
            ["runc", "--root", str(state), "run", "--bundle", str(bundle), name],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        subprocess.run(["runc", "--root", str(state), "delete", "--force", name], capture_output=True)
        return Result(proc.returncode, proc.stdout, proc.stderr)


def missing_tools() -> str | None:
    """Why the images cannot be run here (None when they can)."""
    if os.geteuid() != 0:
        return "running images needs root (buildah mount and runc)"
    absent = [tool for tool in ("buildah", "runc") if shutil.which(tool) is None]
    return f"{' and '.join(absent)} not installed" if absent else None
