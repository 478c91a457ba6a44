"""What clusters killed without `down` leave on the machine, and the image caches of slots no cluster holds.

A test run cut off with its session leaves its network namespace (and cgroups, and /run directories) behind:
/run and the kernel's namespaces outlive the processes. Left alone, that slot stays taken, every later cluster
takes the next one, and the next slot's node caches are cold: three nodes unpack the trainer image again (~7 GiB
each) beside the warm copies nobody uses any more, which is how a disk runs out. So `up` first reclaims abandoned
slots (network.abandoned), then keeps the node caches of slots in use only.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hack.cluster import network, nodes
from hack.cluster.network import Net

NODE_CACHES = nodes.NODE_ROOTS


def reclaim_abandoned() -> list[int]:
    """Remove what each abandoned slot's cluster left (cgroups, run directories, the network); the slots freed."""
    freed = []
    for slot in range(network.SLOTS):
        if network.abandoned(slot):
            net = Net(slot)
            nodes.kill_cgroup_processes(net)  # containers whose shim was killed with the rest
            release(net)
            freed.append(slot)
    return freed


def release(net: Net) -> None:
    """Remove a slot whose processes are gone: its cgroups, its /run directories and its network."""
    nodes.remove_cgroups(net)
    nodes.remove_run_dirs(net)
    network.destroy(net)


def _slot_of(path: Path) -> int | None:
    try:
        return int(path.name.removeprefix("slot-"))
    except ValueError:
        return None


def drop_idle_caches(mine: Net) -> list[Path]:
    """Remove the node caches (unpacked images) of every slot but `mine` that no cluster holds; the paths removed.

    Slots are taken lowest first, so an idle slot's cache is only ever used again when two clusters run at once,
    and then it is filled again; the pool's blobs these caches linked go at the next import's prune."""
    removed = []
    for path in sorted(NODE_CACHES.glob("slot-*")) if NODE_CACHES.exists() else []:
        slot = _slot_of(path)
        if slot is not None and slot != mine.slot and not network.taken(slot):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
