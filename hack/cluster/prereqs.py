"""The Debian packages the test cluster's nodes need, installed with apt when missing (CI machines may be fresh).

containerd 1.6 and runc (the container runtime under each kubelet), containernetworking-plugins (bridge,
host-local, portmap, loopback in /usr/lib/cni), iptables (kube-proxy), iproute2 (the cluster's network
namespace) and util-linux (nsenter, unshare). buildah and mmdebstrap are tests/images's, listed here so one
`make cluster` prepares a fresh machine for both.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

# package -> a file that shows it is installed
PACKAGES = {
    "containerd": "containerd",
    "runc": "runc",
    "containernetworking-plugins": "/usr/lib/cni/bridge",
    "iptables": "iptables",
    "iproute2": "ip",
    "util-linux": "nsenter",
    "buildah": "buildah",
    "mmdebstrap": "mmdebstrap",
}


class PrereqError(RuntimeError):
    pass


def missing() -> list[str]:
    def present(probe: str) -> bool:
        return Path(probe).exists() if probe.startswith("/") else shutil.which(probe) is not None

    return [pkg for pkg, probe in PACKAGES.items() if not present(probe)]


def ensure() -> None:
    """Install what is missing with apt-get; a clear error when apt cannot."""
    todo = missing()
    if not todo:
        return
    if shutil.which("apt-get") is None:
        raise PrereqError(f"the test cluster needs the Debian packages {' '.join(todo)}, and apt-get is not here")
    print(f"  installing {' '.join(todo)} with apt-get", flush=True)
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "--no-install-recommends", *todo]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise PrereqError(
                f"`{' '.join(argv)}` failed (exit {proc.returncode}); install {' '.join(todo)} by hand. "
                f"apt said: {proc.stderr.strip()[-500:]}"
            )
    if still := missing():
        raise PrereqError(f"apt-get finished but {' '.join(still)} is still missing")
