"""Trainer pods on one machine: each torchrun agent in a memory cgroup of its own, as the kubelet runs a container.

A pod here is ``python -m torch.distributed.run --nnodes=N --node-rank=i ... -m tabjob_trainer`` (the operator's
command, bench/sharded_memory.py), started inside a fresh memory cgroup (cgroup v2 ``memory.peak``, or v1's
``memory.max_usage_in_bytes`` on hosts that still mount it) with an optional limit, so its peak is read the way the
kernel holds a pod to its limit. Needs root (creating cgroups).

Page cache is charged to the cgroup that first reads a file's pages: the table lives on tmpfs (/dev/shm), whose pages
are the writer's, and the libraries are loaded once beforehand, so a pod's peak is its own memory (heap, Arrow and
model buffers, the libraries' private pages), not the shared library files another pod already read.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

V2 = Path("/sys/fs/cgroup")
V1 = Path("/sys/fs/cgroup/memory")


@dataclass
class Cgroup:
    path: Path
    v2: bool

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def limit(self, bytes_: int | None) -> None:
        if bytes_ is None:
            return
        (self.path / ("memory.max" if self.v2 else "memory.limit_in_bytes")).write_text(str(bytes_))

    def peak(self) -> int:
        return int((self.path / ("memory.peak" if self.v2 else "memory.max_usage_in_bytes")).read_text().split()[0])

    def oom_killed(self) -> int:
        events = self.path / ("memory.events" if self.v2 else "memory.oom_control")
        for line in events.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0


@contextlib.contextmanager
def cgroup(name: str, limit: int | None = None) -> Iterator[Cgroup]:
    """A fresh memory cgroup, removed afterwards."""
    v2 = (V2 / "cgroup.controllers").exists() and "memory" in (V2 / "cgroup.controllers").read_text()
    parent = V2 if v2 else V1
    if not v2 and not V1.exists():
        raise RuntimeError("no memory cgroup (v2 memory controller or v1 memory hierarchy) to measure pods in")
    path = parent / name
    if path.exists():
        path.rmdir()
    path.mkdir()
    group = Cgroup(path, v2)
    group.limit(limit)
    try:
        yield group
    finally:
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def start_in(group: Cgroup, command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``command`` started inside ``group`` (it moves itself in before exec), its output to ``log``."""
    procs = str(group.procs)

    def enter() -> None:
        with open(procs, "w") as fh:
            fh.write(str(os.getpid()))

    with open(log, "wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=enter)
