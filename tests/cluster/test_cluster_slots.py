"""A network slot whose cluster was killed without `down` is reclaimed by the next `up`; one in use never is, and
the node caches of slots nobody holds go. Real namespaces and veths, no cluster: slot 15, which a test bed with
fewer than sixteen clusters at once never takes for itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.cluster import network, slots
from hack.cluster.network import Net
from hack.cluster.paths import REPO

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="network namespaces need root and iproute2's ip"
)

SLOT = 15


@pytest.fixture
def killed_cluster_net(tmp_path: Path) -> Iterator[Net]:
    """Slot 15's network, built by a process that then exits without removing it (as a killed `up` leaves it)."""
    net = Net(SLOT)
    if network.taken(SLOT):
        pytest.skip(f"network slot {SLOT} is in use on this machine")
    state = str(tmp_path / "net.json")
    code = f"from pathlib import Path; from hack.cluster import network as n; n.build(n.Net({SLOT}), Path({state!r}))"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
    yield net
    network.destroy(net)


def test_a_slot_whose_owner_is_gone_and_which_runs_nothing_is_abandoned_and_reclaimed(killed_cluster_net: Net) -> None:
    net = killed_cluster_net
    assert network.taken(SLOT) and network.abandoned(SLOT)
    assert SLOT in slots.reclaim_abandoned()
    assert not network.taken(SLOT)
    assert not net.netns_path.exists() and not network.owner_file(SLOT).exists()


def test_a_slot_with_a_process_in_its_namespace_is_not_abandoned(killed_cluster_net: Net) -> None:
    net = killed_cluster_net
    resident = subprocess.Popen([*net.in_netns(), "sleep", "60"])  # as a node's containerd runs in it
    try:
        for _ in range(50):  # until nsenter has switched namespaces
            if network.pids_in(net):
                break
            subprocess.run(["sleep", "0.1"])
        assert not network.abandoned(SLOT)
        assert SLOT not in slots.reclaim_abandoned()
        assert network.taken(SLOT)
    finally:
        resident.kill()
        resident.wait()
    assert network.abandoned(SLOT)


def test_a_slot_being_built_by_a_live_up_is_not_abandoned(tmp_path: Path) -> None:
    if network.taken(SLOT):
        pytest.skip(f"network slot {SLOT} is in use on this machine")
    net = Net(SLOT)
    network.build(net, tmp_path / "net.json")  # this process is the owner, and nothing runs in the namespace yet
    try:
        assert not network.abandoned(SLOT)
        assert SLOT not in slots.reclaim_abandoned()
    finally:
        network.destroy(net)
    assert not network.taken(SLOT)


@pytest.mark.parametrize(
    ("caches", "kept"),
    [
        (["slot-13", "slot-14"], ["slot-13"]),  # an idle slot's cache goes, ours stays
        (["slot-13", "slot-15"], ["slot-13", "slot-15"]),  # a slot in use keeps its cache
        (["slot-13", "slot-x"], ["slot-13", "slot-x"]),  # what is not a slot's cache is not ours to remove
    ],
)
def test_only_the_node_caches_of_slots_nobody_holds_are_removed(
    caches: list[str], kept: list[str], killed_cluster_net: Net, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "nodes"
    for name in caches:
        (root / name / "gpu-node-1").mkdir(parents=True)
    monkeypatch.setattr(slots, "NODE_CACHES", root)
    if network.taken(13) or network.taken(14):
        pytest.skip("network slots 13 and 14 must be free on this machine")
    slots.drop_idle_caches(Net(13))
    assert sorted(p.name for p in root.iterdir()) == kept
