"""The test cluster's three nodes: real kubelets (v1.35.4, the control plane's build) over containerd and runc.

Each node has a directory `.cluster/nodes/<name>/` with its containerd, CNI and kubelet configuration, and runs
`node.sh` in the cluster's network namespace and a mount namespace of its own. Its containerd keeps images and
unpacked layers in the cache (`<cache>/containerd/nodes/slot-<k>/<node>`: one cluster holds a network slot at a
time, so no two containerds share a root), and a second `make cluster` imports nothing; containers never outlive a
cluster (`clear_containers`). Image blobs are stored once for every node: each node's content store holds hard
links into one pool (`BLOB_POOL`, images.py fills it).

Where a node differs from a production one (also in hack/cluster/README.md): three kubelets share one machine,
so each reports the machine's real CPU and memory; the node addresses are /32s on the namespace's `lo`; one
kube-proxy and one CoreDNS serve the whole namespace instead of one kube-proxy per node and a CoreDNS Deployment.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from hack.cluster import network
from hack.cluster.network import Net
from hack.cluster.paths import CACHE, LOGS, NET_FILE, NODES_DIR, PKI

KUBELET_VERSION = "v1.35.4"
PAUSE_IMAGE = "localhost/tabjob/pause:1"
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The paths kubelet and containerd 1.6 hard-code; each node bind-mounts its own directory over them (node.sh).
HARDCODED = {
    "device-plugins": Path("/var/lib/kubelet/device-plugins"),
    "log-containers": Path("/var/log/containers"),
    "run": Path("/run/containerd"),
}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    index: int
    # extended resource -> device count, advertised by the device plugin
    devices: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def _gpu_labels(product: str, memory_mib: int, count: int, family: str) -> dict[str, str]:
    """What NVIDIA's GPU Feature Discovery labels a node with."""
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": str(memory_mib),
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.family": family,
    }


NODES: list[NodeSpec] = [
    NodeSpec("gpu-node-1", 0, {"nvidia.com/gpu": 4}, _gpu_labels("NVIDIA-A100-SXM4-40GB", 40960, 4, "ampere")),
    NodeSpec(
        "gpu-node-2",
        1,
        {"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 2},
        {**_gpu_labels("NVIDIA-H100-80GB-HBM3", 81559, 4, "hopper"), "nvidia.com/mig.strategy": "mixed"},
    ),
    NodeSpec("cpu-node-1", 2),
]


def node_dir(name: str) -> Path:
    return NODES_DIR / name


NODE_ROOTS = CACHE / "containerd" / "nodes"  # one directory per network slot: slot-<k>/<node>


def containerd_root(net: Net, name: str) -> Path:
    """Persistent per network slot and node: images and their unpacked layers survive `cluster-down`."""
    return NODE_ROOTS / f"slot-{net.slot}" / name


def blob_dir(name: str) -> Path:
    """Where the node's containerd keeps image blobs, one file per sha256 digest."""
    net = network.load(NET_FILE)
    if net is None:
        raise RuntimeError(f"no cluster network recorded in {NET_FILE}")
    return containerd_root(net, name) / "io.containerd.content.v1.content" / "blobs" / "sha256"


# Every blob any node holds, once: the nodes' content stores hold hard links to these files, so a multi-GB trainer
# image takes its size once on disk, yet each containerd owns its store and its garbage collector deletes only its
# own links (a collector deletes every blob in its store that its own metadata does not list, so a store shared by
# nodes lost the blobs of every other node at the first image removal). A pool file no node links is removed
# (images.prune_pool).
BLOB_POOL = CACHE / "containerd" / "blobs"


def _drop_shared_layout(net: Net) -> None:
    """Remove this slot's node roots from the layout before BLOB_POOL, whose nodes shared one content directory
    (`<cache>/containerd/{content,slot-<k>}`), and that directory once no slot of that layout is left."""
    old = CACHE / "containerd"
    shutil.rmtree(old / f"slot-{net.slot}", ignore_errors=True)
    if not any(old.glob("slot-*")):
        shutil.rmtree(old / "content", ignore_errors=True)


RUN_ROOT = Path("/run/tabjob")


def run_dir(name: str) -> Path:
    """The node's /run/containerd (sockets, shim state): short, since a unix socket's path has at most 104 bytes
    and a TABJOB_CLUSTER_DIR may be long; per slot, so clusters side by side never share one."""
    net = network.load(NET_FILE)
    if net is None:
        raise RuntimeError(f"no cluster network recorded in {NET_FILE}")
    return RUN_ROOT / str(net.slot) / name


def socket(name: str) -> Path:
    return run_dir(name) / "containerd.sock"


def cgroup_parent(net: Net, name: str) -> str:
    return f"/tabjob/{net.slot}/{name}"


def _containerd_toml(net: Net, spec: NodeSpec) -> str:
    d = node_dir(spec.name)
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{containerd_root(net, spec.name)}"
state = "{d / "state"}"
# Not used by the CRI plugin; the ones left would only add start-up time and paths outside the node directory.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

# The garbage collector runs only when an image is removed synchronously (the kubelet's removals are), never on its
# schedule: images.py records an image's blobs one by one before the image that references them exists, and a
# scheduled collection in between deleted them ("content digest ...: not found" importing the index).
[plugins."io.containerd.gc.v1.scheduler"]
  deletion_threshold = 0
  mutation_threshold = 2147483647
  startup_delay = "8760h"

[grpc]
  address = "{socket(spec.name)}"
[ttrpc]
  address = "{socket(spec.name)}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  # This machine cannot write oom_score_adj (no CAP_SYS_RESOURCE): without this runc fails with "can't get final
  # child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Pod network namespaces under the node's state directory, not /var/run/netns shared by every node.
  netns_mounts_under_state_dir = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d / "cni"}"
    max_conf_num = 1
"""


def _cni_conflist(net: Net, spec: NodeSpec) -> dict[str, object]:
    start, end = net.node_pod_range(spec.index)
    return {
        "cniVersion": "1.0.0",
        "name": f"tabjob-{spec.name}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": net.bridge,  # one bridge for all nodes: pods on different nodes meet on it
                "isGateway": True,
                "ipMasq": False,  # nothing leaves the machine, so nothing needs masquerading
                "hairpinMode": True,  # a pod reaching its own Service's ClusterIP comes back to itself
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(node_dir(spec.name) / "ipam"),
                    "ranges": [
                        [{"subnet": net.pod_cidr, "rangeStart": start, "rangeEnd": end, "gateway": net.pod_gateway}]
                    ],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def _kubelet_config(net: Net, spec: NodeSpec) -> dict[str, object]:
    d = node_dir(spec.name)
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": net.node_ip(spec.index),
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": net.node_ip(spec.index),
        "healthzPort": 10248,
        "tlsCertFile": str(PKI / f"{spec.name}-serving.crt"),
        "tlsPrivateKeyFile": str(PKI / f"{spec.name}-serving.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(PKI / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{socket(spec.name)}",
        # This machine's cgroups are v1 (hybrid), which kubelet 1.35 refuses unless told; no systemd here.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_parent(net, spec.name),
        "failSwapOn": False,
        "clusterDomain": "cluster.local",
        "clusterDNS": [net.dns_service_ip],
        "resolvConf": "",  # no host search domains or nameservers leak into pods
        "podLogsDir": str(d / "pod-logs"),
        "maxPods": 110,
        "serializeImagePulls": False,
        # Pods start as soon as the kubelet sees them, status reaches the API server promptly.
        "syncFrequency": "10s",
        "fileCheckFrequency": "20s",
        "nodeStatusUpdateFrequency": "5s",
        "nodeStatusReportFrequency": "30s",
        # No registry can give an image back once removed, so the kubelet never removes one to free disk.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "staticPodPath": "",
        "shutdownGracePeriod": "0s",
        "localStorageCapacityIsolation": True,
    }


def _kubeconfig(server: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "tabjob", "cluster": {"server": server, "certificate-authority": str(PKI / "ca.crt")}}],
        "users": [
            {
                "name": name,
                "user": {
                    "client-certificate": str(PKI / f"{name}-client.crt"),
                    "client-key": str(PKI / f"{name}-client.key"),
                },
            }
        ],
        "contexts": [{"name": "tabjob", "context": {"cluster": "tabjob", "user": name}}],
        "current-context": "tabjob",
    }


def _make_cgroups(net: Net, name: str) -> None:
    """The kubelet's cgroupRoot in every v1 hierarchy (it refuses to start without it)."""
    for hierarchy in CGROUP_ROOT.iterdir():
        if hierarchy.name == "unified" or not (hierarchy / "cgroup.procs").exists():
            continue
        path = hierarchy / cgroup_parent(net, name).lstrip("/")
        parent = hierarchy
        for part in cgroup_parent(net, name).strip("/").split("/"):
            child = parent / part
            child.mkdir(exist_ok=True)
            if hierarchy.name == "cpuset":  # a new v1 cpuset is empty until given its parent's CPUs and memory
                for f in ("cpuset.cpus", "cpuset.mems"):
                    if not (child / f).read_text().strip():
                        (child / f).write_text((parent / f).read_text())
            parent = child
        assert path.exists()


def prepare(net: Net, spec: NodeSpec, server: str) -> None:
    """Write the node's configuration files and create its directories and cgroups."""
    d = node_dir(spec.name)
    for sub in ("device-plugins", "log-containers", "state", "cni", "ipam", "kubelet", "pod-logs"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    run_dir(spec.name).mkdir(parents=True, exist_ok=True)
    _drop_shared_layout(net)
    containerd_root(net, spec.name).mkdir(parents=True, exist_ok=True)
    for target in HARDCODED.values():
        target.mkdir(parents=True, exist_ok=True)  # mount points on the host; empty, and left empty
    (d / "containerd.toml").write_text(_containerd_toml(net, spec))
    (d / "cni" / "10-tabjob.conflist").write_text(json.dumps(_cni_conflist(net, spec), indent=1) + "\n")
    (d / "kubelet.json").write_text(json.dumps(_kubelet_config(net, spec), indent=1) + "\n")
    (d / "kubeconfig").write_text(json.dumps(_kubeconfig(server, spec.name), indent=1) + "\n")
    (d / "health").touch()
    _make_cgroups(net, spec.name)


def command(net: Net, spec: NodeSpec) -> tuple[list[str], dict[str, str]]:
    """argv and extra environment of the node's process (nodes.start runs it in its own process group)."""
    d = node_dir(spec.name)
    labels = ",".join(f"{k}={v}" for k, v in sorted(spec.labels.items()))
    kubelet = [
        f"--config={d / 'kubelet.json'}",
        f"--kubeconfig={d / 'kubeconfig'}",
        f"--root-dir={d / 'kubelet'}",
        f"--hostname-override={spec.name}",
        f"--node-ip={net.node_ip(spec.index)}",
        "--v=1",
    ]
    if labels:
        kubelet.append(f"--node-labels={labels}")
    plugin = []
    if spec.devices:
        plugin = [f"--node={spec.name}", f"--dir={HARDCODED['device-plugins']}", f"--health-file={d / 'health'}"]
        plugin += [f"--resource={r}={n}" for r, n in spec.devices.items()]
    argv = [
        *net.in_netns(),
        "unshare", "--mount", "--propagation", "private", "--",
        "bash", str(Path(__file__).with_name("node.sh")), str(d), str(run_dir(spec.name)), str(LOGS / spec.name),
    ]  # fmt: skip
    return argv, {"KUBELET_ARGS": " ".join(kubelet), "PLUGIN_ARGS": " ".join(plugin)}


def ctr_argv(name: str) -> list[str]:
    """`ctr` against the node's containerd, in the CRI plugin's namespace."""
    return ["ctr", f"--address={socket(name)}", "--namespace=k8s.io"]


def ctr(name: str, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*ctr_argv(name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"ctr {' '.join(args)} on {name} failed: {proc.stderr.strip()}")
    return proc


def clear_containers(name: str) -> None:
    """Delete every container (and pod sandbox) a node's containerd knows: a new cluster starts with none, and
    the kubelet of a fresh API server would otherwise find sandboxes of pods that no longer exist."""
    if not socket(name).exists():
        return
    listed = ctr(name, "containers", "list", "--quiet", check=False, timeout=30)
    for cid in listed.stdout.split():
        ctr(name, "tasks", "kill", "--signal=SIGKILL", cid, check=False, timeout=30)
        ctr(name, "tasks", "delete", "--force", cid, check=False, timeout=30)
        ctr(name, "containers", "delete", cid, check=False, timeout=30)


def _cgroup_dirs(net: Net) -> list[Path]:
    """Every cgroup under the cluster's root in every hierarchy, deepest first."""
    found: list[Path] = []
    for hierarchy in CGROUP_ROOT.iterdir():
        top = hierarchy / "tabjob" / str(net.slot)
        if top.is_dir():
            found.extend(p for p in top.rglob("*") if p.is_dir())
            found.append(top)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def kill_cgroup_processes(net: Net) -> int:
    """SIGKILL every process left in the cluster's cgroups (containers whose shim is gone); how many there were."""
    pids: set[int] = set()
    for cg in _cgroup_dirs(net):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(p) for p in (cg / "cgroup.procs").read_text().split())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def remove_run_dirs(net: Net) -> None:
    shutil.rmtree(RUN_ROOT / str(net.slot), ignore_errors=True)
    with contextlib.suppress(OSError):
        RUN_ROOT.rmdir()  # only when no other cluster's slot is left under it


def remove_cgroups(net: Net) -> None:
    for cg in _cgroup_dirs(net):
        with contextlib.suppress(OSError):
            cg.rmdir()
    for hierarchy in CGROUP_ROOT.iterdir():
        with contextlib.suppress(OSError):
            (hierarchy / "tabjob").rmdir()  # only when no other cluster's slot is left under it


def shim_pids() -> list[int]:
    """containerd shims of this cluster's nodes: they outlive containerd by design, and hold the containers."""
    try:
        sockets = [str(socket(n.name)).encode() for n in NODES]
    except RuntimeError:
        return []
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            data = cmdline.read_bytes()
            if b"containerd-shim" in data and any(s in data for s in sockets):
                found.append(int(cmdline.parts[2]))
    return found
