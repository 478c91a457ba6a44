"""Start and stop the local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and three
nodes, each a real kubelet over its own containerd (nodes.py), with kube-proxy and CoreDNS (services.py) in the
cluster's network namespace (network.py).

    python -m hack.cluster.controlplane up      # or: make cluster
    python -m hack.cluster.controlplane down    # or: make cluster-down
    python -m hack.cluster.controlplane status

Each component runs in its own process group (its pgid is written to .cluster/pids/<name>) so `down` can stop it
and everything it spawned. `up` exits once the API server is ready and the nodes are Ready; the processes keep
running in the background.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fcntl
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

from hack.cluster import certs, images, kueue, network, nodes, prereqs, s3, services, slots
from hack.cluster.kube import Kube
from hack.cluster.network import Net
from hack.cluster.paths import (
    BUILD_SCRIPT,
    ENV_FILE,
    KUBECONFIG,
    LOGS,
    NET_FILE,
    PIDS,
    PKI,
    PORTS_FILE,
    REPO,
    STATE,
)

NODE_PROCS = [f"node-{n.name}" for n in nodes.NODES]
CONTROL_PLANE = ["kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "seaweedfs"]
# Nodes are stopped first; the control plane after them.
STOP_ORDER = [*NODE_PROCS, "kube-proxy", "coredns", *CONTROL_PLANE]
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


def commands(bins: dict[str, Path], ports: dict[str, int], net: Net) -> dict[str, list[str]]:
    k8s, pki, kc = bins["K8S_BIN"], PKI, str(KUBECONFIG)
    address, service_cidr = net.host_ip, net.service_cidr
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
            # The host end of the cluster's veth: reachable from pods (through the kubernetes Service) and host.
            f"--bind-address={address}",
            f"--advertise-address={address}",
            f"--secure-port={ports['apiserver']}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-account-issuer={ISSUER}",
            f"--service-cluster-ip-range={service_cidr}",
            # Pods on a lost node are evicted after 30 s instead of 300 s, so node-failure tests end in minutes.
            "--default-not-ready-toleration-seconds=30",
            "--default-unreachable-toleration-seconds=30",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            # The defaults (NamespaceLifecycle, ServiceAccount, PodSecurity, ResourceQuota, ...) plus the two a
            # production cluster adds, so blockOwnerDeletion needs the right RBAC as it does there.
            "--enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement",
            # kubectl logs/exec go to the kubelets (node IP:10250) over TLS, verified against the cluster CA.
            f"--kubelet-certificate-authority={pki / 'ca.crt'}",
            f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            # The aggregation layer, as kubeadm configures it: Kueue serves its visibility API (pending workloads,
            # queue positions) as an APIService. Requests reach a Service's endpoints (pod IPs, routed from the host)
            # rather than its ClusterIP, which only kube-proxy's rules inside the cluster's namespace translate; the
            # same resolver serves the admission webhooks.
            f"--requestheader-client-ca-file={pki / 'ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--enable-aggregator-routing=true",
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
            f"--service-cluster-ip-range={service_cidr}",
            # A node whose kubelet stopped is NotReady after 20 s instead of 50 s (node-failure tests).
            "--node-monitor-grace-period=20s",
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
    }


def node_commands(bins: dict[str, Path], net: Net) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each node's process plus kube-proxy and CoreDNS, with their extra environment."""
    env = {"K8S_BIN": str(bins["K8S_BIN"]), "NODE_BIN": str(bins["NODE_BIN"])}
    cmds = {}
    for spec in nodes.NODES:
        argv, extra = nodes.command(net, spec)
        cmds[f"node-{spec.name}"] = (argv, {**env, **extra})
    cmds["kube-proxy"] = (services.kube_proxy_command(net, bins["K8S_BIN"]), {})
    cmds["coredns"] = (services.coredns_command(net, bins["COREDNS_BIN"]), {})
    return cmds


def start(name: str, argv: list[str], extra_env: dict[str, str] | None = None) -> None:
    LOGS.mkdir(parents=True, exist_ok=True)
    PIDS.mkdir(parents=True, exist_ok=True)
    with open(LOGS / f"{name}.log", "ab") as log:
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **(extra_env or {})}
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


def server_url() -> str:
    ports = json.loads(PORTS_FILE.read_text())
    net = network.load(NET_FILE)
    if net is None:
        raise ClusterError(f"no cluster network recorded in {NET_FILE}")
    return f"https://{net.host_ip}:{ports['apiserver']}"


def wait_ready(timeout: float = 180.0) -> None:
    base = server_url()
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
    net = network.load(NET_FILE)
    if net is not None:  # recorded by up() before anything started
        checks.append(("CoreDNS ready", lambda: _http_ok(f"http://{net.dns_ip}:8181/ready")))
    started = time.monotonic()
    for what, ok in checks:
        while not ok():
            _check_alive()
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}; logs in {LOGS}")
            time.sleep(0.25)
        print(f"  {what}: {time.monotonic() - started:.1f}s", flush=True)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _wanted_nodes() -> dict[str, dict[str, int]]:
    """node name -> the extended resources it must advertise as allocatable before the cluster counts as up."""
    return {n.name: n.devices for n in nodes.NODES}


def _nodes_ready(base: str, ctx: ssl.SSLContext) -> bool:
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
        # GPU nodes count once the device plugin's devices are allocatable, so a test never races the plugin.
        and all(
            n["status"].get("allocatable", {}).get(res) == str(count)
            for res, count in _wanted_nodes().get(n["metadata"]["name"], {}).items()
        )
    }
    return set(_wanted_nodes()) <= ready


def _running_procs() -> list[str]:
    return [n for n in STOP_ORDER if (PIDS / n).exists()]


def is_up() -> bool:
    if not PORTS_FILE.exists() or not (procs := _running_procs()) or not all(_alive(n) for n in procs):
        return False
    return _https_ok(f"{server_url()}/readyz", admin_context())


def write_env(bins: dict[str, Path], net: Net) -> None:
    # The test bed's S3 server for this shell too (tabjob predict s3://..., aws-cli, pyarrow): the same keys the
    # cluster's Secret holds, with the endpoint the host reaches.
    s3_env = "".join(f"export {k}={v}\n" for k, v in s3.secret_data(s3.host_endpoint(net)).items())
    ENV_FILE.write_text(
        "# Generated by hack/cluster/controlplane.py: `source .cluster/env` to use the test cluster.\n"
        f"export KUBECONFIG={KUBECONFIG}\n"
        f'export PATH={bins["K8S_BIN"]}:{bins["HELM_BIN"]}:"$PATH"\n'
        f"{s3_env}"
    )


def _start_nodes(bins: dict[str, Path], net: Net, server: str) -> None:
    """Start every node with its kubelet held back, clear what a previous cluster left in its containerd, import
    the sandbox image, then let the kubelets start."""
    for spec in nodes.NODES:
        nodes.prepare(net, spec, server)
        (nodes.node_dir(spec.name) / "kubelet.stopped").touch()
    for name, (argv, env) in node_commands(bins, net).items():
        start(name, argv, env)

    def ready(spec: nodes.NodeSpec) -> None:
        deadline = time.monotonic() + 30
        while not nodes.socket(spec.name).exists():
            _check_alive()
            if time.monotonic() > deadline:
                raise ClusterError(f"{spec.name}'s containerd never opened {nodes.socket(spec.name)}; logs in {LOGS}")
            time.sleep(0.1)
        nodes.clear_containers(spec.name)

    with concurrent.futures.ThreadPoolExecutor(len(nodes.NODES)) as pool:
        list(pool.map(ready, nodes.NODES))
    import_into_nodes(images.harness_archives(bins["NODE_BIN"]))  # the sandbox image, before any pod
    for spec in nodes.NODES:
        (nodes.node_dir(spec.name) / "kubelet.stopped").unlink()
    # The project's images (large) while the kubelets register.
    _import_images(bins)


def _import_images(bins: dict[str, Path]) -> None:
    """Import into every node what it lacks: the harness's images and those hack/images/build.sh built
    (TABJOB_CLUSTER_PROJECT_IMAGES=0: the harness's only, for a cluster that runs no trainer)."""
    archives = images.harness_archives(bins["NODE_BIN"])
    if os.environ.get("TABJOB_CLUSTER_PROJECT_IMAGES", "1") != "0":
        archives += images.project_archives()
    if kueue.wanted():
        archives.append(images.kueue_archive(bins["KUEUE_BIN"], kueue.version_of(bins["KUEUE_BIN"])))
    import_into_nodes(archives)


def import_into_nodes(archives: list[images.Archive]) -> None:
    def one(spec: nodes.NodeSpec) -> None:
        imported = images.import_all(spec.name, archives)
        if imported:
            print(f"  {spec.name}: imported {', '.join(imported)}", flush=True)

    # One node at a time, and one cluster at a time across every checkout on this machine: the first writes a new
    # blob into the pool, the others link it, and the pool is pruned only while no import can be linking into it.
    nodes.BLOB_POOL.mkdir(parents=True, exist_ok=True)
    with open(nodes.BLOB_POOL.parent / "import.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for spec in nodes.NODES:
            one(spec)
        images.prune_pool()


def up() -> None:
    if is_up():
        _import_images(binaries(build=False))  # images built since it started (make images cluster)
        print(f"cluster already running; source {ENV_FILE}")
        return
    down(quiet=True)  # whatever a crashed or interrupted run left behind
    # The kubelet's sockets live under its root directory (.../nodes/<node>/kubelet/pod-resources/kubelet.sock)
    # and a unix socket's path has at most 104 bytes.
    if len(str(STATE)) > 55:
        raise ClusterError(f"TABJOB_CLUSTER_DIR={STATE} is too long for the kubelets' sockets: at most 55 bytes")
    prereqs.ensure()
    bins = binaries()
    started = time.monotonic()
    STATE.mkdir(parents=True, exist_ok=True)
    for slot in slots.reclaim_abandoned():
        print(f"  reclaimed network slot {slot}: its cluster was killed without cluster-down", flush=True)
    net = network.create(NET_FILE)
    for path in slots.drop_idle_caches(net):
        print(f"  removed {path}: no cluster holds that slot", flush=True)
    ports = {n: free_port() for n in ("etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler")}
    PORTS_FILE.write_text(json.dumps(ports) + "\n")
    node_ips = {n.name: net.node_ip(n.index) for n in nodes.NODES}
    certs.make_all(PKI, [net.host_ip, net.kubernetes_service_ip], node_ips)
    server = server_url()
    write_kubeconfig(KUBECONFIG, server)
    try:
        # All start at once: each retries until its dependency answers, which is faster than starting in turn. Not
        # the controller manager and the scheduler: at start-up they read the API server's
        # extension-apiserver-authentication ConfigMap and exit when the connection is refused, which an API server
        # serving the aggregation layer (Kueue's visibility API) is slow enough to cause; they start once it answers.
        cmds = commands(bins, ports, net)
        late = ("kube-controller-manager", "kube-scheduler")
        for name, argv in cmds.items():
            if name not in late:
                start(name, argv)
        _start_nodes(bins, net, server)
        _install_dns(net)  # waits for the API server's /readyz
        for name in late:
            start(name, cmds[name])
        start("seaweedfs", s3.command(net, STATE))  # the test bed's object store (hack/cluster/s3.py)
        wait_ready()
        s3.install(Kube.from_kubeconfig(KUBECONFIG), net, STATE, _pgid("seaweedfs")[0])
        if kueue.wanted():
            _install_kueue(bins)
    except (ClusterError, RuntimeError, OSError):
        down(quiet=True, keep_logs=True)
        raise
    write_env(bins, net)
    print(f"cluster up in {time.monotonic() - started:.1f}s; source {ENV_FILE}")


def _install_kueue(bins: dict[str, Path]) -> None:
    """Kueue's chart, once the nodes can run its controller; `up` returns once its webhook answers (hack/cluster/
    kueue.py), since from then on every pod created outside kube-system passes through it."""
    kueue.install(bins["HELM_BIN"] / "helm", bins["KUEUE_CHART"], kueue.version_of(bins["KUEUE_BIN"]))
    kueue.wait_ready(Kube.from_kubeconfig(KUBECONFIG))


def _install_dns(net: Net) -> None:
    kube = Kube.from_kubeconfig(KUBECONFIG)
    deadline = time.monotonic() + 60
    while not _https_ok(f"{server_url()}/readyz", admin_context()):
        _check_alive()
        if time.monotonic() > deadline:
            raise ClusterError(f"kube-apiserver not ready after 60 s; logs in {LOGS}")
        time.sleep(0.25)
    services.install_dns_service(kube, net)


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


def _stop_nodes(net: Net) -> None:
    """Kubelets first (so none restarts a container), then every container through containerd, then the nodes'
    processes, and whatever outlives them: containerd shims and processes left in the cluster's cgroups."""
    for spec in nodes.NODES:
        d = nodes.node_dir(spec.name)
        if d.exists():
            (d / "kubelet.stopped").touch()
            with contextlib.suppress(OSError, ValueError, ProcessLookupError):
                os.kill(int((d / "kubelet.pid").read_text()), signal.SIGKILL)
    with concurrent.futures.ThreadPoolExecutor(len(nodes.NODES)) as pool:
        list(pool.map(lambda spec: nodes.clear_containers(spec.name), nodes.NODES))
    _stop_groups([p for name in [*NODE_PROCS, "kube-proxy", "coredns"] for p in _pgid(name)], grace=5.0)
    for _ in range(20):
        shims = nodes.shim_pids()
        for pid in shims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        left = nodes.kill_cgroup_processes(net) + len(shims) + len(network.pids_in(net))
        for pid in network.pids_in(net):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if not left:
            break
        time.sleep(0.25)
    slots.release(net)


def stop_apiserver(sig: int = signal.SIGKILL) -> None:
    """Stop kube-apiserver alone (SIGKILL: a crash; SIGTERM: a graceful restart); etcd and the rest stay up."""
    for pgid in _pgid("kube-apiserver"):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + 60
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def start_apiserver(timeout: float = 120.0) -> None:
    """Start kube-apiserver again with the flags, ports and certificates it had, and wait for /readyz."""
    net = network.load(NET_FILE)
    if net is None:
        raise ClusterError(f"no cluster network recorded in {NET_FILE}")
    argv = commands(binaries(build=False), json.loads(PORTS_FILE.read_text()), net)["kube-apiserver"]
    start("kube-apiserver", argv)
    deadline = time.monotonic() + timeout
    while not _https_ok(f"{server_url()}/readyz", admin_context()):
        _check_alive()
        if time.monotonic() > deadline:
            raise ClusterError(f"kube-apiserver not ready {timeout:.0f} s after its restart; logs in {LOGS}")
        time.sleep(0.25)


def _pgid(name: str) -> list[int]:
    try:
        return [int((PIDS / name).read_text())]
    except (OSError, ValueError):
        return []


def down(quiet: bool = False, keep_logs: bool = False) -> None:
    net = network.load(NET_FILE)
    if net is not None:
        _stop_nodes(net)
    # The control plane's state is thrown away, so a short grace: kube-apiserver would otherwise spend 10 s and
    # more draining watches nobody is waiting for.
    _stop_groups([p for name in CONTROL_PLANE for p in _pgid(name)], grace=2.0)
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
    except RuntimeError as exc:  # ClusterError, and the network's, nodes' and prerequisites' errors
        print(f"tests/cluster: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
