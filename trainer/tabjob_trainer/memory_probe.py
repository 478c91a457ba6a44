"""This process's and its container's peak memory, as each rank logs it when the job ends (docs/sharding.md).

``VmHWM`` (the process's peak resident set, /proc/self/status) and the cgroup's peak: cgroup v2's ``memory.peak``
or v1's ``memory.max_usage_in_bytes``, which in a pod is the whole container's (the launcher, torchrun's agent and
every rank together), the number the kernel's memory limit is held to.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_PEAKS = (Path("/sys/fs/cgroup/memory.peak"), Path("/sys/fs/cgroup/memory/memory.max_usage_in_bytes"))


def vm_hwm(status: Path = Path("/proc/self/status")) -> int | None:
    """Peak resident bytes of this process."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def cgroup_peak(paths: tuple[Path, ...] = CGROUP_PEAKS) -> int | None:
    """Peak bytes of this container's cgroup, where readable."""
    for path in paths:
        try:
            return int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return None


def peak_line(rank: int) -> str:
    """One log line: ``tabjob-trainer: rank R peak memory: process N MiB, cgroup M MiB``."""

    def mib(n: int | None) -> str:
        return "unknown" if n is None else f"{n / 2**20:.1f} MiB"

    return f"tabjob-trainer: rank {rank} peak memory: process {mib(vm_hwm())}, cgroup {mib(cgroup_peak())}"
