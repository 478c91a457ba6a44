"""Node loss and clean-up: a stopped kubelet makes its node NotReady and a restarted one Ready again, and
`make cluster-down` leaves nothing behind (processes, namespaces, mounts, cgroups), run twice."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hack.cluster import network
from hack.cluster.paths import REPO
from hack.cluster.wait import wait_condition
from tests.cluster.fixtures import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_a_stopped_kubelet_makes_its_node_not_ready_until_it_restarts(cluster: Cluster) -> None:
    cluster.stop_kubelet("cpu-node-1")
    try:
        # --node-monitor-grace-period=20s on the controller manager
        cluster.wait_for("cpu-node-1 NotReady", lambda: not cluster.node_ready("cpu-node-1"), timeout=90)
    finally:
        cluster.start_kubelet("cpu-node-1")
    cluster.wait_for("cpu-node-1 Ready again", lambda: cluster.node_ready("cpu-node-1"), timeout=90)


def _traces(state: Path, net: network.Net) -> list[str]:
    """Whatever of a cluster in `state` is still on the machine."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(state).encode() in cmdline.read_bytes():
                found.append(f"process {cmdline.parts[2]}: {cmdline.read_bytes()[:200]!r}")
        except OSError:
            continue
    found += [f"mount: {line}" for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(state) in line]
    if net.netns_path.exists():
        found.append(f"network namespace {net.netns}")
    if subprocess.run(["ip", "link", "show", net.host_veth], capture_output=True).returncode == 0:
        found.append(f"link {net.host_veth}")
    found += [f"cgroup {p}" for p in Path("/sys/fs/cgroup").glob(f"*/tabjob/{net.slot}")]
    return found


def test_cluster_down_leaves_nothing_and_can_run_twice(cluster: Cluster) -> None:
    state = Path(tempfile.mkdtemp(prefix="tjc-")) / "c"  # short: pytest's tmp_path is too long for the sockets
    # Only the harness's images: the trainer's gigabytes would be unpacked again for a cluster that runs none.
    env = {**os.environ, "TABJOB_CLUSTER_DIR": str(state), "TABJOB_CLUSTER_PROJECT_IMAGES": "0"}

    def ctl(action: str) -> None:
        subprocess.run([sys.executable, "-m", "hack.cluster.controlplane", action], cwd=REPO, env=env, check=True)

    ctl("up")
    net = network.load(state / "net.json")
    assert net is not None and net.slot != cluster.net.slot  # side by side with the session's cluster
    kubectl = [str(cluster.kubectl_path), f"--kubeconfig={state / 'kubeconfig'}"]
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: m, image: "
           "localhost/tabjob/toolbox:1, imagePullPolicy: Never, args: [sleep, '600']}\n")  # fmt: skip
    subprocess.run([*kubectl, "apply", "-f", "-"], input=pod, text=True, check=True, capture_output=True)
    wait_condition(kubectl, "pod/p", "Ready", timeout=60)
    ctl("down")
    assert _traces(state, net) == []
    ctl("down")
    assert not state.exists()
    state.parent.rmdir()
