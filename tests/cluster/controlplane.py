"""Start and stop the local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the
node agent (fake GPU nodes that run pods as local processes).

    python -m tests.cluster.controlplane up      # or: make cluster
    python -m tests.cluster.controlplane down    # or: make cluster-down
    python -m tests.cluster.controlplane status

Each component runs in its own process group (its pgid is written to .cluster/pids/<name>) so `down` can stop it
and everything it spawned. `up` exits once the API server is ready and the nodes are Ready; the processes keep
running in the background.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.cluster import certs
from tests.cluster.paths import (
    BUILD_SCRIPT,
    ENV_FILE,
    KUBECONFIG,
    LOGS,
    MOUNTPOINTS,
    PIDS,
    PKI,
    PODS,
    PORTS_FILE,
    REPO,
    STATE,
    VENV_BIN,
)

# The node agent is stopped first so it can end its pods; the control plane after it.
STOP_ORDER = ["node-agent", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"]
SERVICE_CIDR = "10.0.0.0/24"
ISSUER = "https://kubernetes.default.svc.cluster.local"


class ClusterError(RuntimeError):
    pass


def binaries(build: bool = True) -> dict[str, Path]:
    """The bin directories of the cached build; builds them (minutes, once) when missing and `build` is set."""
    args = [str(BUILD_SCRIPT)] if build else [str(BUILD_SCRIPT), "--print"]
    proc = subprocess.run(args, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"{BUILD_SCRIPT} failed (exit {proc.returncode}); see its message above")
    dirs = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return {k: Path(v) for k, v in dirs.items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_kubeconfig(path: Path, server: str) -> None:
    # JSON is YAML, and kubectl and the Python client both read it.
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "tabjob", "cluster": {"server": server, "certificate-authority": str(PKI / "ca.crt")}}],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate": str(PKI / "admin.crt"), "client-key": str(PKI / "admin.key")},
            }
        ],
        "contexts": [{"name": "tabjob", "context": {"cluster": "tabjob", "user": "admin"}}],
        "current-context": "tabjob",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")


def commands(bins: dict[str, Path], ports: dict[str, int]) -> dict[str, list[str]]:
    k8s, pki, kc = bins["K8S_BIN"], PKI, str(KUBECONFIG)
    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    peer_url = f"http://127.0.0.1:{ports['etcd_peer']}"
    return {
        "etcd": [
            str(bins["ETCD_BIN"] / "etcd"),
            "--name=default",
            f"--data-dir={STATE / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(k8s / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports['apiserver']}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-account-issuer={ISSUER}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            # The defaults (NamespaceLifecycle, ServiceAccount, PodSecurity, ResourceQuota, ...) plus the two a
            # production cluster adds, so blockOwnerDeletion needs the right RBAC as it does there.
            "--enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement",
            # kubectl logs/exec go to the node agent's kubelet endpoint on 127.0.0.1:<node port> over TLS.
            f"--kubelet-certificate-authority={pki / 'ca.crt'}",
            f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            "--profiling=false",
            "--v=1",
        ],
        "kube-controller-manager": [
            str(k8s / "kube-controller-manager"),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['controller_manager']}",
            f"--root-ca-file={pki / 'ca.crt'}",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--cluster-signing-cert-file={pki / 'ca.crt'}",
            f"--cluster-signing-key-file={pki / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # The node lifecycle controller lifts the new nodes' not-ready taint on its next pass: 1 s, not 5 s.
            "--node-monitor-period=1s",
            "--use-service-account-credentials=true",
            "--controllers=*",
            "--leader-elect=false",
            "--v=1",
        ],
        "kube-scheduler": [
            str(k8s / "kube-scheduler"),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['scheduler']}",
            "--leader-elect=false",
            "--v=1",
        ],
        "node-agent": [str(VENV_BIN / "python"), "-m", "tests.cluster.agent", "--kubeconfig", kc],
    }


def start(name: str, argv: list[str]) -> None:
    LOGS.mkdir(parents=True, exist_ok=True)
    PIDS.mkdir(parents=True, exist_ok=True)
    with open(LOGS / f"{name}.log", "ab") as log:
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=env,
            start_new_session=True,  # its own process group, so `down` stops it and its children together
        )
    (PIDS / name).write_text(str(proc.pid))


def _https_ok(url: str, ctx: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def admin_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(PKI / "ca.crt"))
    ctx.load_cert_chain(str(PKI / "admin.crt"), str(PKI / "admin.key"))
    return ctx


def _alive(name: str) -> bool:
    try:
        os.killpg(int((PIDS / name).read_text()), 0)
        return True
    except (OSError, ValueError):
        return False


def _check_alive() -> None:
    for name in STOP_ORDER:
        if (PIDS / name).exists() and not _alive(name):
            tail = (LOGS / f"{name}.log").read_text(errors="replace")[-3000:]
            raise ClusterError(f"{name} exited during start-up; last log lines:\n{tail}")


def wait_ready(timeout: float = 120.0) -> None:
    ports = json.loads(PORTS_FILE.read_text())
    base = f"https://127.0.0.1:{ports['apiserver']}"
    ctx = admin_context()
    deadline = time.monotonic() + timeout
    checks = [
        ("kube-apiserver /readyz", lambda: _https_ok(f"{base}/readyz", ctx)),
        ("nodes Ready", lambda: _nodes_ready(base, ctx)),
        (
            "default ServiceAccount and kube-root-ca.crt",
            lambda: (
                _https_ok(f"{base}/api/v1/namespaces/default/serviceaccounts/default", ctx)
                and _https_ok(f"{base}/api/v1/namespaces/default/configmaps/kube-root-ca.crt", ctx)
            ),
        ),
    ]
    started = time.monotonic()
    for what, ok in checks:
        while not ok():
            _check_alive()
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}; logs in {LOGS}")
            time.sleep(0.25)
        print(f"  {what}: {time.monotonic() - started:.1f}s", flush=True)


def _nodes_ready(base: str, ctx: ssl.SSLContext) -> bool:
    from tests.cluster.agent.nodes import NODES  # the agent owns the node list

    try:
        with urllib.request.urlopen(f"{base}/api/v1/nodes", context=ctx, timeout=2) as resp:
            items = json.load(resp)["items"]
    except OSError:
        return False
    ready = {
        n["metadata"]["name"]
        for n in items
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
        and not any(t["key"] == "node.kubernetes.io/not-ready" for t in n["spec"].get("taints", []))
    }
    return {n.name for n in NODES} <= ready


def is_up() -> bool:
    if not PORTS_FILE.exists() or not all(_alive(n) for n in STOP_ORDER):
        return False
    ports = json.loads(PORTS_FILE.read_text())
    return _https_ok(f"https://127.0.0.1:{ports['apiserver']}/readyz", admin_context())


def write_env(bins: dict[str, Path]) -> None:
    ENV_FILE.write_text(
        "# Generated by tests/cluster/controlplane.py: `source .cluster/env` to use the test cluster.\n"
        f"export KUBECONFIG={KUBECONFIG}\n"
        f'export PATH={bins["K8S_BIN"]}:{bins["HELM_BIN"]}:"$PATH"\n'
    )


def up() -> None:
    if is_up():
        print(f"cluster already running; source {ENV_FILE}")
        return
    down(quiet=True)  # whatever a crashed or interrupted run left behind
    bins = binaries()
    started = time.monotonic()
    STATE.mkdir(parents=True, exist_ok=True)
    ports = {n: free_port() for n in ("etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler")}
    PORTS_FILE.write_text(json.dumps(ports) + "\n")
    certs.make_all(PKI)
    write_kubeconfig(KUBECONFIG, f"https://127.0.0.1:{ports['apiserver']}")
    # All start at once: each retries until its dependency answers, which is faster than starting in turn.
    for name, argv in commands(bins, ports).items():
        start(name, argv)
    try:
        wait_ready()
    except ClusterError:
        down(quiet=True, keep_logs=True)
        raise
    write_env(bins)
    print(f"cluster up in {time.monotonic() - started:.1f}s; source {ENV_FILE}")


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in the group (orphaned zombies wait for init to reap them)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _stop_groups(pgids: list[int], grace: float) -> None:
    """SIGTERM the process groups together, SIGKILL whatever is still alive after `grace` seconds."""
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(_group_alive(p) for p in pgids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def _other_agents_running() -> bool:
    """Whether a node agent of another cluster (another TABJOB_CLUSTER_DIR) still runs on this machine."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"tests.cluster.agent\x00--kubeconfig" in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def _remove_mountpoints() -> None:
    """Remove the empty directories/files the agent created on the host as bind-mount targets.

    Skipped while another cluster's agent runs: its pods may be using the same paths as mount points, and
    removing a mount point on the host detaches it in their namespaces too.
    """
    if not MOUNTPOINTS.exists() or _other_agents_running():
        return
    for line in sorted(set(MOUNTPOINTS.read_text().splitlines()), key=len, reverse=True):
        p = Path(line)
        try:
            if p.is_dir() and not p.is_symlink():
                p.rmdir()  # only when empty: never remove something a user put there
            elif p.is_file() and p.stat().st_size == 0:
                p.unlink()
        except OSError:
            pass


def down(quiet: bool = False, keep_logs: bool = False) -> None:
    def pgid(name: str) -> list[int]:
        try:
            return [int((PIDS / name).read_text())]
        except (OSError, ValueError):
            return []

    # The agent first, so it ends its pods; then the control plane together. Its state is thrown away, so a
    # short grace: kube-apiserver would otherwise spend 10 s and more draining watches nobody is waiting for.
    _stop_groups(pgid("node-agent"), grace=15.0)
    _stop_groups([p for name in STOP_ORDER[1:] for p in pgid(name)], grace=2.0)
    # Pods run in their own process groups; the agent ends them, this catches any it could not.
    leftovers = [int(f.read_text()) for f in PODS.glob("*/*.pgid")] if PODS.exists() else []
    _stop_groups(leftovers, grace=2.0)
    _remove_mountpoints()
    if STATE.exists():
        if keep_logs:
            for child in STATE.iterdir():
                if child != LOGS:
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
        else:
            shutil.rmtree(STATE)
    if not quiet:
        print("cluster down")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status", "build"])
    args = parser.parse_args(argv)
    try:
        if args.action == "up":
            up()
        elif args.action == "down":
            down()
        elif args.action == "build":
            binaries()
        else:
            print("running" if is_up() else "not running")
            return 0 if is_up() else 1
    except ClusterError as exc:
        print(f"tests/cluster: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
