"""The node agent process: registers the fake nodes, keeps them Ready, serves their kubelet endpoints, provisions
claims, and runs a PodRunner for every pod bound to one of its nodes."""

from __future__ import annotations

import ipaddress
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlparse

from tests.cluster.agent import kubelet_server, nodes, provisioner
from tests.cluster.agent.hosts import HostsFiles
from tests.cluster.agent.pods import PodRunner
from tests.cluster.kube import ApiError, Kube

log = logging.getLogger("agent")

POD_NETWORK = ipaddress.ip_network("127.10.0.0/16")  # on loopback: every address reaches this machine
LEASE_RENEW_SECONDS = 10
STATUS_HEARTBEAT_SECONDS = 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Agent:
    def __init__(self, kubeconfig: Path) -> None:
        self.kube = Kube.from_kubeconfig(kubeconfig)
        self.api_port = urlparse(self.kube.server).port or 443
        self.hosts = HostsFiles()
        self.node_names = {n.name for n in nodes.NODES}
        self.runners: dict[str, PodRunner] = {}
        self.lock = threading.Lock()
        self._ips = (str(ip) for ip in POD_NETWORK.hosts() if int(ip) & 0xFF not in (0, 1, 255))
        self.stopping = threading.Event()

    def allocate_ip(self) -> str:
        with self.lock:
            return next(self._ips)

    def forget(self, uid: str) -> None:
        with self.lock:
            self.runners.pop(uid, None)

    def find_log(self, ns: str, pod: str, container: str, previous: bool) -> tuple[Path, Callable[[], bool]] | None:
        with self.lock:
            runner = next((r for r in self.runners.values() if (r.ns, r.pod_name) == (ns, pod)), None)
        if runner is None:
            return None
        c = next((c for c in runner.init + runner.main if c.name == container), None)
        if c is None:
            return None
        name = f"{container}.previous.log" if previous else f"{container}.log"
        return runner.dir / "logs" / name, lambda: c.proc is not None or not c.done

    # -- loops ---------------------------------------------------------------------------------------------
    def _every(self, seconds: float, what: str, fn: Callable[[], None]) -> None:
        def loop() -> None:
            while not self.stopping.is_set():
                try:
                    fn()
                except Exception as exc:  # keep the node alive through API hiccups
                    log.warning("%s: %s", what, exc)
                self.stopping.wait(seconds)

        threading.Thread(target=loop, name=what, daemon=True).start()

    def _leases(self) -> None:
        for spec in nodes.NODES:
            nodes.renew_lease(self.kube, spec)

    def _heartbeats(self) -> None:
        for spec in nodes.NODES:
            nodes.heartbeat(self.kube, spec)

    def _headless(self) -> None:
        items = self.kube.get("/api/v1/services")["items"]
        self.hosts.set_headless(
            {(s["metadata"]["namespace"], s["metadata"]["name"]) for s in items if s["spec"].get("clusterIP") == "None"}
        )

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        if pod["spec"].get("nodeName") not in self.node_names:
            return
        uid = pod["metadata"]["uid"]
        with self.lock:
            runner = self.runners.get(uid)
        if kind == "DELETED":
            if runner:
                runner.vanish()
            return
        if runner:
            runner.update(pod)
            return
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return  # finished before this agent started; nothing to run
        runner = PodRunner(self, pod)
        with self.lock:
            self.runners[uid] = runner
        runner.start()

    def _watch_pods(self) -> None:
        while not self.stopping.is_set():
            try:
                listing = self.kube.get("/api/v1/pods", params={"fieldSelector": "spec.nodeName!="})
                for pod in listing["items"]:
                    self._on_pod("ADDED", pod)
                rv = listing["metadata"]["resourceVersion"]
                for event in self.kube.watch("/api/v1/pods?fieldSelector=spec.nodeName%21%3D", rv):
                    if event["type"] == "ERROR":
                        break  # e.g. resourceVersion too old: list again
                    if event["type"] != "BOOKMARK":
                        self._on_pod(event["type"], event["object"])
                    if self.stopping.is_set():
                        return
            except (ApiError, OSError) as exc:
                log.warning("pod watch: %s; re-listing", exc)
                time.sleep(1)

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping.set()
        with self.lock:
            runners = list(self.runners.values())
        for r in runners:
            r._kill_all(grace=2.0)
        raise SystemExit(0)

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        log.info("waiting for the API server at %s", self.kube.server)
        while True:  # the API server starts alongside us
            try:
                self.kube.get("/readyz")
                break
            except (ApiError, OSError):
                time.sleep(0.25)
        for spec in nodes.NODES:
            port = _free_port()
            kubelet_server.serve(port, self.find_log)
            self._retry(lambda s=spec, p=port: nodes.register(self.kube, s, p))  # type: ignore[misc]
        self._every(LEASE_RENEW_SECONDS, "leases", self._leases)
        self._every(STATUS_HEARTBEAT_SECONDS, "node-status", self._heartbeats)
        self._retry(lambda: provisioner.ensure_storage_class(self.kube))
        self._every(1.0, "provisioner", lambda: provisioner.reconcile(self.kube))
        self._every(1.0, "headless-services", self._headless)
        log.info("nodes registered: %s", ", ".join(sorted(self.node_names)))
        self._watch_pods()

    def _retry(self, fn: Callable[[], None]) -> None:
        # Right after /readyz, RBAC bootstrap or the namespace controller may still be settling.
        for _ in range(120):
            try:
                return fn()
            except (ApiError, OSError) as exc:
                log.info("retrying: %s", exc)
                time.sleep(0.5)
        fn()
