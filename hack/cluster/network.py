"""The test cluster's network: one network namespace per cluster, addresses only in 198.18.0.0/15.

The nodes' containerd, kubelets, kube-proxy and CoreDNS run inside a network namespace the harness creates
(`tabjob-<slot>`), so kube-proxy's iptables rules, the pods' bridge and IP forwarding (needed to route a pod's
packet to a ClusterIP endpoint) stay in it and the host's own network is untouched: the host keeps forwarding off,
so no pod packet can leave the machine. A veth pair joins the host and that namespace; the host routes the slot's
addresses through it, which is how the API server (on the host end of the veth), kubectl logs/exec and the
operator (a host process in the e2e tests) reach nodes and pods.

Each cluster takes a free slot k (0..15): its addresses are 198.19.16k.0/20 (veth, CoreDNS, node IPs and the
Service range 198.19.16k+1.0/24) and 198.18.16k.0/20 (pods, one /24 per node), so clusters in several
TABJOB_CLUSTER_DIRs run side by side.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

NETNS_DIR = Path("/run/netns")
SLOTS = 16
# Who took each slot: the `up` that built its network, by pid. /run outlives a killed session on this machine, and
# so do network namespaces; the owner file tells a slot whose cluster was killed from one still being built.
OWNERS_DIR = Path("/run/tabjob-slots")


class NetworkError(RuntimeError):
    pass


@dataclass(frozen=True)
class Net:
    slot: int

    @property
    def base(self) -> int:
        return self.slot * 16

    @property
    def netns(self) -> str:
        return f"tabjob-{self.slot}"

    @property
    def netns_path(self) -> Path:
        return NETNS_DIR / self.netns

    @property
    def host_veth(self) -> str:
        return f"tj{self.slot}h"

    @property
    def ns_veth(self) -> str:
        return f"tj{self.slot}n"

    @property
    def bridge(self) -> str:
        return f"tj{self.slot}br"

    @property
    def host_ip(self) -> str:
        """The host end of the veth: the API server listens here, so pods and host clients share one address."""
        return f"198.19.{self.base}.1"

    @property
    def ns_ip(self) -> str:
        return f"198.19.{self.base}.2"

    @property
    def dns_ip(self) -> str:
        """Where CoreDNS listens (on the namespace's lo); the kube-dns Service's endpoint."""
        return f"198.19.{self.base}.5"

    def node_ip(self, index: int) -> str:
        return f"198.19.{self.base}.{11 + index}"

    @property
    def service_cidr(self) -> str:
        return f"198.19.{self.base + 1}.0/24"

    @property
    def kubernetes_service_ip(self) -> str:
        return f"198.19.{self.base + 1}.1"

    @property
    def dns_service_ip(self) -> str:
        return f"198.19.{self.base + 1}.10"

    @property
    def slot_cidr(self) -> str:
        return f"198.19.{self.base}.0/20"

    @property
    def pod_cidr(self) -> str:
        return f"198.18.{self.base}.0/20"

    @property
    def pod_gateway(self) -> str:
        return f"198.18.{self.base}.1"

    def node_pod_range(self, index: int) -> tuple[str, str]:
        third = self.base + 1 + index
        return f"198.18.{third}.2", f"198.18.{third}.254"

    def node_pod_cidr(self, index: int) -> str:
        return f"198.18.{self.base + 1 + index}.0/24"

    def in_netns(self) -> list[str]:
        """The argv prefix that runs a command inside the cluster's network namespace."""
        return ["nsenter", f"--net={self.netns_path}", "--"]


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetworkError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def save(net: Net, path: Path) -> None:
    path.write_text(json.dumps(asdict(net)) + "\n")


def load(path: Path) -> Net | None:
    try:
        return Net(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def taken(slot: int) -> bool:
    net = Net(slot)
    if net.netns_path.exists():
        return True
    return bool(_run("ip", "-o", "link", "show", net.host_veth, check=False).returncode == 0)


def owner_file(slot: int) -> Path:
    return OWNERS_DIR / f"{slot}.pid"


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): with the pid, who it is."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()[19]


def _owner_alive(slot: int) -> bool:
    try:
        pid, started = owner_file(slot).read_text().split()
        return _start_time(int(pid)) == started  # a pid alone could be a new process's by now
    except (OSError, ValueError):
        return False


def abandoned(slot: int) -> bool:
    """Taken, yet nothing runs in it and the `up` that took it is gone: a cluster killed without `down` (a test run
    cut off with its session). A running cluster's containerds and kubelets live in its namespace, and one being
    built has its `up` alive, so neither is ever taken for abandoned."""
    return taken(slot) and not pids_in(Net(slot)) and not _owner_alive(slot)


def create(state_file: Path) -> Net:
    """Take a free slot and build its namespace, veth pair, routes and bridge; record the slot in `state_file`."""
    for slot in range(SLOTS):
        if not taken(slot):
            break
    else:
        raise NetworkError(f"all {SLOTS} cluster network slots are in use (ip netns list shows tabjob-*)")
    net = Net(slot)
    build(net, state_file)
    return net


def build(net: Net, state_file: Path) -> None:
    """Build one slot's network, owned by this process (see `abandoned`)."""
    save(net, state_file)  # before anything exists, so `down` can remove a half-built network
    OWNERS_DIR.mkdir(parents=True, exist_ok=True)
    owner_file(net.slot).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
    _run("ip", "netns", "add", net.netns)
    ns = ["ip", "-n", net.netns]
    _run("ip", "link", "add", net.host_veth, "type", "veth", "peer", "name", net.ns_veth, "netns", net.netns)
    _run("ip", "addr", "add", f"{net.host_ip}/30", "dev", net.host_veth)
    _run("ip", "link", "set", net.host_veth, "up")
    for route in (net.slot_cidr, net.pod_cidr):
        _run("ip", "route", "add", route, "via", net.ns_ip, "dev", net.host_veth)
    _run(*ns, "link", "set", "lo", "up")
    _run(*ns, "addr", "add", f"{net.ns_ip}/30", "dev", net.ns_veth)
    _run(*ns, "link", "set", net.ns_veth, "up")
    _run(*ns, "route", "add", "default", "via", net.host_ip)
    for index in range(3):
        _run(*ns, "addr", "add", f"{net.node_ip(index)}/32", "dev", "lo")
    _run(*ns, "addr", "add", f"{net.dns_ip}/32", "dev", "lo")
    # The pods' bridge, made here rather than by the first CNI ADD so that every node's CNI config finds it.
    _run(*ns, "link", "add", net.bridge, "type", "bridge")
    _run(*ns, "addr", "add", f"{net.pod_gateway}/20", "dev", net.bridge)
    _run(*ns, "link", "set", net.bridge, "up")
    # Forwarding inside this namespace only: a pod's packet to a ClusterIP is DNATed to another pod on the bridge.
    _run(*net.in_netns(), "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")


def destroy(net: Net) -> None:
    """Remove the namespace (its bridge, veth end and iptables rules go with it) and the host's veth and routes."""
    with contextlib.suppress(NetworkError):
        _run("ip", "link", "del", net.host_veth, check=False)
    if net.netns_path.exists():
        _run("ip", "netns", "del", net.netns, check=False)
    # `ip netns add` turned /run/netns into a mount point of its own; undo that once no namespace is left in it.
    with contextlib.suppress(OSError):
        if not any(NETNS_DIR.iterdir()):
            _run("umount", str(NETNS_DIR), check=False)
    owner_file(net.slot).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        OWNERS_DIR.rmdir()  # only when no other cluster's slot is left


def pids_in(net: Net) -> list[int]:
    """Processes whose network namespace is the cluster's (what must be stopped before the namespace goes)."""
    try:
        target = net.netns_path.stat().st_ino
    except OSError:
        return []
    found = []
    for ns in Path("/proc").glob("[0-9]*/ns/net"):
        with contextlib.suppress(OSError, ValueError):
            if ns.stat().st_ino == target:
                found.append(int(ns.parts[2]))
    return found
