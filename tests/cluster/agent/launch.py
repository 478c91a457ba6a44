"""Container entry: runs as `unshare --mount --uts --propagation private python -m tests.cluster.agent.launch PLAN`.

Inside its private mount and UTS namespaces it bind-mounts every volume at the path the container spec names
(read-only where asked), puts the pod's hosts file over /etc/hosts and its termination-log file at
terminationMessagePath, sets the hostname to the pod's, then execs the container's command. The mounts vanish
with the process; only empty mount-point directories are left on the host, and `make cluster-down` removes those
(they are listed in .cluster/mountpoints).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 1, 32, 4096, 16384
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _mount(src: str, dst: str, flags: int) -> None:
    if _libc.mount(src.encode(), dst.encode(), None, flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} -> {dst}: {os.strerror(err)}")


def _make_target(dst: Path, is_file: bool, record: Path) -> None:
    """Create the bind-mount target on the host if it is missing, and remember it for cluster-down."""
    created: list[Path] = []
    parent = dst if not is_file else dst.parent
    for p in [*reversed(parent.parents), parent]:
        if not p.exists():
            created.append(p)
    parent.mkdir(parents=True, exist_ok=True)
    if is_file and not dst.exists():
        dst.touch()
        created.append(dst)
    if created:
        with open(record, "a") as f:
            f.writelines(f"{p}\n" for p in created)


# The checkout (its .venv runs every container) and the cluster's state (volume sources, termination logs) must
# stay visible inside the pod even when a volume lands on one of their ancestors, e.g. an emptyDir at /tmp while
# the checkout is a fresh clone under /tmp.
REPO = Path(__file__).resolve().parents[3]


def _reexpose(dst: Path, kept: dict[Path, int]) -> None:
    """Bind each kept directory that the mount at ``dst`` just hid back at its own path (through an O_PATH fd
    opened before any mount, since the path itself no longer leads there)."""
    for path, fd in kept.items():
        if dst in path.parents:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError:
                continue  # a read-only volume over the checkout: nothing to be done, the start error will say so
            _mount(f"/proc/self/fd/{fd}", str(path), MS_BIND | MS_REC)


def apply(plan: dict[str, Any]) -> None:
    record = Path(plan["mountpoints_file"])
    kept = {p: os.open(p, os.O_PATH) for p in {REPO, record.parent.resolve()} if p.exists()}
    # Parents before children, so a mount at /data/x lands on top of the one at /data.
    for m in sorted(plan["mounts"], key=lambda m: len(Path(m["dst"]).parts)):
        dst = Path(m["dst"])
        _make_target(dst, bool(m.get("file")), record)
        _mount(m["src"], str(dst), MS_BIND | MS_REC)
        if m.get("ro"):
            _mount("none", str(dst), MS_REMOUNT | MS_BIND | MS_RDONLY)
        _reexpose(dst, kept)
    for fd in kept.values():
        os.close(fd)
    socket.sethostname(plan["hostname"])
    cwd = Path(plan["cwd"])
    cwd.mkdir(parents=True, exist_ok=True)
    os.chdir(cwd)


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    try:
        apply(plan)
        os.execvpe(plan["argv"][0], plan["argv"], plan["env"])
    except OSError as exc:
        # What a runtime reports when the entrypoint cannot start; kubelet shows it as a StartError.
        msg = f"tests/cluster launch: {exc}\n"
        sys.stderr.write(msg)
        Path(plan["termination_log"]).write_text(msg)
        sys.exit(128)


if __name__ == "__main__":
    main()
