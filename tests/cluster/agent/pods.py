"""Run one pod bound to a fake node as local process groups, and report its status the way kubelet does.

Lifecycle: volumes are materialised (retrying while a ConfigMap or claim is missing), init containers run one
after another, then the containers run together. Exits are handled by restartPolicy (Never, OnFailure, Always,
with a short back-off). Deletion with a grace period sends SIGTERM to every container's process group, waits,
then SIGKILLs, and finally removes the pod object as kubelet does (delete with grace 0).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.cluster.agent import podspec
from tests.cluster.agent.hosts import PodName
from tests.cluster.agent.nodes import rfc3339
from tests.cluster.kube import MERGE, ApiError
from tests.cluster.paths import MOUNTPOINTS, PODS, REPO, VENV_BIN

if TYPE_CHECKING:
    from tests.cluster.agent.agent import Agent

log = logging.getLogger("agent.pods")

MAX_MESSAGE = 4096  # kubelet's cap on a termination message
FALLBACK_LINES, FALLBACK_BYTES = 80, 2048  # FallbackToLogsOnError takes this much of the log tail
BACKOFF_CAP = 10.0  # kubelet caps at 300 s; tests want restarts within seconds


@dataclass
class Container:
    spec: dict[str, Any]
    init: bool
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: str = ""
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: dict[str, Any] = field(default_factory=dict)
    done: bool = False  # finished for good under the restart policy
    next_start: float = 0.0

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def status(self, uid: str) -> dict[str, Any]:
        running = "running" in self.state
        return {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": "",
            "containerID": f"tabjob://{uid}/{self.name}/{self.restarts}",
            "ready": running and not self.init,
            "started": running,
            "restartCount": self.restarts,
            "state": self.state,
            "lastState": self.last_state,
        }


def exit_code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc  # killed by signal N -> 128+N, as container runtimes report


class PodRunner(threading.Thread):
    def __init__(self, agent: Agent, pod: dict[str, Any]) -> None:
        super().__init__(name=f"pod-{pod['metadata']['namespace']}/{pod['metadata']['name']}", daemon=True)
        self.agent = agent
        self.pod = pod
        self.uid: str = pod["metadata"]["uid"]
        self.ns: str = pod["metadata"]["namespace"]
        self.pod_name: str = pod["metadata"]["name"]
        self.dir = PODS / self.uid
        self.wake = threading.Event()
        self.gone = False  # the pod object no longer exists
        self.ip = ""
        self.phase = "Pending"
        self.conditions: dict[str, bool] = {
            "PodReadyToStartContainers": False,
            "Initialized": False,
            "ContainersReady": False,
            "Ready": False,
        }
        spec = pod["spec"]
        self.policy: str = spec.get("restartPolicy", "Always")
        self.init = [Container(c, init=True) for c in spec.get("initContainers", [])]
        self.main = [Container(c, init=False) for c in spec.get("containers", [])]
        self.start_time = rfc3339()
        self.message = ""
        self._posted: dict[str, Any] | None = None

    # -- events from the watch ---------------------------------------------------------------------------
    def update(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        self.wake.set()

    def vanish(self) -> None:
        self.gone = True
        self.wake.set()

    @property
    def deleting(self) -> bool:
        return self.gone or bool(self.pod["metadata"].get("deletionTimestamp"))

    # -- main ----------------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._lifecycle()
        except Exception as exc:
            # Say so on the pod rather than leave it Pending for ever: a harness bug should fail a test loudly.
            log.exception("pod %s/%s failed in the agent", self.ns, self.pod_name)
            self.phase, self.message = "Failed", f"tests/cluster node agent error: {exc!r}"
            self._post()
        finally:
            self._kill_all(grace=0)
            self.agent.hosts.remove(self.uid)
            self.agent.forget(self.uid)
            shutil.rmtree(self.dir, ignore_errors=True)

    def _lifecycle(self) -> None:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self.ip = self.agent.allocate_ip()
        self._post()
        volumes = self._prepare_volumes()
        if volumes is None:
            return self._finish_deletion()
        self.conditions["PodReadyToStartContainers"] = True
        spec = self.pod["spec"]
        self.agent.hosts.add(
            self.uid,
            PodName(self.ns, self.pod_name, podspec.pod_hostname(self.pod), spec.get("subdomain", ""), self.ip),
            self.dir / "hosts",
        )
        for c in self.init:
            self._supervise([c], volumes)
            if self.deleting:
                return self._finish_deletion()
            if c.state.get("terminated", {}).get("exitCode", 0) != 0:
                self.phase = "Failed"
                self.message = f"init container {c.name} failed"
                for m in self.main:
                    m.state = {"waiting": {"reason": "PodInitializing"}}
                self._post()
                return self._await_deletion()
        self.conditions["Initialized"] = True
        self._supervise(self.main, volumes)
        if self.deleting:
            return self._finish_deletion()
        codes = [c.state.get("terminated", {}).get("exitCode", 1) for c in self.main]
        self.phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"
        self._post()
        return self._await_deletion()

    def _prepare_volumes(self) -> dict[str, Path] | None:
        while not self.deleting:
            try:
                self._status_pod_ip()
                return podspec.materialise_volumes(self.agent.kube, self.pod, self.dir)
            except podspec.NotReadyYet as exc:
                for c in self.init + self.main:
                    c.state = {"waiting": {"reason": exc.reason, "message": str(exc)}}
                self._post()
                self.wake.wait(1.0)
                self.wake.clear()
        return None

    def _status_pod_ip(self) -> None:
        # fieldRef status.podIP is resolved from our copy of the pod, which may predate our own status post.
        self.pod.setdefault("status", {}).update(
            {"podIP": self.ip, "podIPs": [{"ip": self.ip}], "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}]}
        )

    # -- containers ----------------------------------------------------------------------------------------
    def _restart_wanted(self, c: Container, code: int) -> bool:
        if c.init:
            return code != 0 and self.policy != "Never"
        return self.policy == "Always" or (self.policy == "OnFailure" and code != 0)

    def _supervise(self, containers: list[Container], volumes: dict[str, Path]) -> None:
        """Run containers until each is done under the restart policy, or the pod is being deleted."""
        while not self.deleting:
            now = time.monotonic()
            for c in containers:
                if c.done:
                    continue
                if c.proc is None and now >= c.next_start:
                    self._start(c, volumes)
                elif c.proc is not None and c.proc.poll() is not None:
                    code = self._record_exit(c)
                    if self._restart_wanted(c, code):
                        c.last_state, c.restarts = c.state, c.restarts + 1
                        delay = min(BACKOFF_CAP, 2.0 ** (c.restarts - 1))
                        c.next_start = time.monotonic() + delay
                        c.state = {
                            "waiting": {
                                "reason": "CrashLoopBackOff",
                                "message": (
                                    f"back-off {delay:.0f}s restarting failed container={c.name} pod={self.pod_name}"
                                ),
                            }
                        }
                    else:
                        c.done = True
            ready = all("running" in c.state for c in self.main)
            self.conditions["ContainersReady"] = self.conditions["Ready"] = ready
            if self.phase == "Pending" and any("running" in c.state or c.done for c in containers if not c.init):
                self.phase = "Running"
            self._post()
            if all(c.done for c in containers):
                return
            self.wake.wait(0.2)
            self.wake.clear()

    def _start(self, c: Container, volumes: dict[str, Path]) -> None:
        try:
            env = podspec.container_env(self.agent.kube, self.pod, c.spec, self.agent.api_port)
            plan = podspec.launch_plan(
                c.spec,
                env,
                podspec.mounts(c.spec, volumes, env),
                str(self.dir / "work"),
                podspec.pod_hostname(self.pod),
                self.dir / "hosts",
                self.dir / f"{c.name}.termination-log",
            )
        except podspec.NotReadyYet as exc:
            c.state = {"waiting": {"reason": exc.reason, "message": str(exc)}}
            c.next_start = time.monotonic() + 1.0
            return
        plan["mountpoints_file"] = str(MOUNTPOINTS)
        plan["termination_log"] = str(self.dir / f"{c.name}.termination-log")
        (self.dir / f"{c.name}.termination-log").write_text("")
        plan_file = self.dir / f"{c.name}.plan.json"
        podspec.dump(plan, plan_file)
        logfile = self.dir / "logs" / f"{c.name}.log"
        if logfile.exists():  # the previous run's log is what `kubectl logs --previous` shows
            logfile.replace(self.dir / "logs" / f"{c.name}.previous.log")
        with open(logfile, "wb") as out:
            c.proc = subprocess.Popen(
                [
                    "unshare",
                    "--mount",
                    "--uts",
                    "--propagation",
                    "private",
                    str(VENV_BIN / "python"),
                    "-m",
                    "tests.cluster.agent.launch",
                    str(plan_file),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                start_new_session=True,  # one process group per container: signals reach all it spawns
            )
        (self.dir / f"{c.name}.pgid").write_text(str(c.proc.pid))
        c.started_at = rfc3339()
        c.state = {"running": {"startedAt": c.started_at}}

    def _termination_message(self, c: Container, code: int) -> str:
        try:
            msg = (self.dir / f"{c.name}.termination-log").read_text(errors="replace")[:MAX_MESSAGE]
        except OSError:
            msg = ""
        if not msg and code != 0 and c.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            text = (self.dir / "logs" / f"{c.name}.log").read_text(errors="replace")
            msg = "".join(text.splitlines(keepends=True)[-FALLBACK_LINES:])[-FALLBACK_BYTES:]
        return msg

    def _record_exit(self, c: Container) -> int:
        assert c.proc is not None
        code = exit_code(c.proc.returncode)
        c.proc = None
        (self.dir / f"{c.name}.pgid").unlink(missing_ok=True)
        term: dict[str, Any] = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": c.started_at,
            "finishedAt": rfc3339(),
            "containerID": f"tabjob://{self.uid}/{c.name}/{c.restarts}",
        }
        msg = self._termination_message(c, code)
        if msg:
            term["message"] = msg
        c.state = {"terminated": term}
        return code

    def _kill_all(self, grace: float) -> None:
        """SIGTERM every running container's process group, SIGKILL what is left after `grace` seconds."""
        live = [(c, c.proc) for c in self.init + self.main if c.proc is not None]
        for _, proc in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(proc.poll() is None for _, proc in live) and time.monotonic() < deadline:
            time.sleep(0.1)
        for c, proc in live:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if c.proc is proc:  # not already recorded by the pod's own thread
                self._record_exit(c)

    # -- deletion ------------------------------------------------------------------------------------------
    def _await_deletion(self) -> None:
        while not self.deleting:
            self.wake.wait(5.0)
            self.wake.clear()
        self._finish_deletion()

    def _finish_deletion(self) -> None:
        grace = self.pod["metadata"].get("deletionGracePeriodSeconds", 30)
        self._kill_all(grace=0 if self.gone else float(grace))
        if self.gone:
            return
        for c in self.init + self.main:
            if "terminated" not in c.state:
                c.state = (
                    {"terminated": {"exitCode": 0, "reason": "ContainerStatusUnknown"}}
                    if ("waiting" in c.state)
                    else c.state
                )
        self.conditions["ContainersReady"] = self.conditions["Ready"] = False
        if self.phase in ("Pending", "Running"):
            codes = [c.state.get("terminated", {}).get("exitCode", 0) for c in self.main]
            self.phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"
        self._post()
        body = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": self.uid},
        }
        try:
            self.agent.kube.delete(f"/api/v1/namespaces/{self.ns}/pods/{self.pod_name}", body)
        except ApiError as exc:
            if exc.status != 409:  # 409: a new pod of the same name already replaced it
                raise

    # -- status --------------------------------------------------------------------------------------------
    def _status(self) -> dict[str, Any]:
        t = rfc3339()
        conds = [{"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": t}]
        for kind, ok in self.conditions.items():
            cond: dict[str, Any] = {
                "type": kind,
                "status": "True" if ok else "False",
                "lastProbeTime": None,
                "lastTransitionTime": t,
            }
            if not ok and self.phase in ("Succeeded", "Failed") and kind in ("Ready", "ContainersReady"):
                cond["reason"] = "PodCompleted"
            conds.append(cond)
        status: dict[str, Any] = {
            "phase": self.phase,
            "conditions": conds,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "startTime": self.start_time,
            "qosClass": self.pod.get("status", {}).get("qosClass", "BestEffort"),
            "containerStatuses": [c.status(self.uid) for c in self.main],
        }
        if self.ip:
            status.update({"podIP": self.ip, "podIPs": [{"ip": self.ip}]})
        if self.init:
            status["initContainerStatuses"] = [c.status(self.uid) for c in self.init]
        if self.message:
            status["message"] = self.message
        return status

    def _post(self) -> None:
        status = self._status()
        # Timestamps of conditions change on every render; compare without them to post only real changes.
        key = {**status, "conditions": [(c["type"], c["status"]) for c in status["conditions"]]}
        if key == self._posted or self.gone:
            return
        if self._posted is not None:
            old = {c["type"]: c for c in self.pod.get("status", {}).get("conditions", [])}
            for c in status["conditions"]:
                prev = old.get(c["type"])
                if prev and prev.get("status") == c["status"] and prev.get("lastTransitionTime"):
                    c["lastTransitionTime"] = prev["lastTransitionTime"]
        try:
            self.pod = self.agent.kube.patch(
                f"/api/v1/namespaces/{self.ns}/pods/{self.pod_name}/status", {"status": status}, content_type=MERGE
            )
            self._status_pod_ip()
            self._posted = key
        except ApiError as exc:
            if exc.status == 404:
                self.gone = True
            else:
                log.warning("status update of %s/%s: %s", self.ns, self.pod_name, exc)
