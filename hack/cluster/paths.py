"""Where the test cluster keeps its state: one directory, `.cluster/` at the repo root (git-ignored).

Every certificate, log, configuration and node directory (kubelet root, containerd state) lives under it; what
cannot (containerd's image store, cached per network slot; the nodes' short socket directories under
/run/tabjob; the network namespace; cgroups) is named after the cluster's network slot and removed by
`make cluster-down`.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("TABJOB_CLUSTER_DIR", REPO / ".cluster"))
PKI = STATE / "pki"
LOGS = STATE / "logs"
PIDS = STATE / "pids"  # one file per component: its process-group id
KUBECONFIG = STATE / "kubeconfig"
ENV_FILE = STATE / "env"
PORTS_FILE = STATE / "ports.json"
BUILD_SCRIPT = REPO / "hack" / "cluster" / "build.sh"
NODES_DIR = STATE / "nodes"  # one directory per node: containerd, CNI and kubelet configuration and state
NET_FILE = STATE / "net.json"  # the cluster's network slot (hack/cluster/network.py)
CACHE = Path(os.environ.get("TABJOB_CLUSTER_CACHE", Path.home() / ".cache" / "tabjob" / "cluster"))
