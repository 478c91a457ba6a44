"""Where the test cluster keeps its state: one directory, `.cluster/` at the repo root (git-ignored).

Every process the harness starts, every certificate, log, pod directory and volume lives under it, so
`make cluster-down` can stop and remove everything by deleting one tree.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("TABJOB_CLUSTER_DIR", REPO / ".cluster"))
PKI = STATE / "pki"
LOGS = STATE / "logs"
PIDS = STATE / "pids"  # one file per component: its process-group id
PODS = STATE / "pods"  # one directory per pod uid: logs, volumes, pgid files
VOLUMES = STATE / "volumes"  # persistent volumes, one directory per claim
KUBECONFIG = STATE / "kubeconfig"
ENV_FILE = STATE / "env"
PORTS_FILE = STATE / "ports.json"
MOUNTPOINTS = STATE / "mountpoints"  # host paths the agent created as bind-mount targets
BUILD_SCRIPT = REPO / "tests" / "cluster" / "build.sh"
VENV_BIN = REPO / ".venv" / "bin"
NODES_DIR = STATE / "nodes"  # one directory per node: containerd, CNI and kubelet configuration and state
NET_FILE = STATE / "net.json"  # the cluster's network slot (tests/cluster/network.py)
CACHE = Path(os.environ.get("TABJOB_CLUSTER_CACHE", Path.home() / ".cache" / "tabjob" / "cluster"))
