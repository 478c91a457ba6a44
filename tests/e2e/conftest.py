"""E2E fixtures: the CRD installed on the local cluster and the operator running as a real subprocess.

The operator runs on the host (it reaches the API server and rank 0's progress endpoint on the pod network, as an
operator pod would); the trainer pods it creates run as containers on the cluster's kubelets from the CPU trainer
image that `make images` built and `make cluster` imported into every node.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tabjob.api.platform_policy import Policy
from tests.cluster.fixtures import Cluster
from tests.e2e.children import spawn

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "crds" / "tabjob.dev_tabularjobs.yaml"
PREDICTION_CRD = REPO / "crds" / "tabjob.dev_tabularpredictions.yaml"
# The CPU trainer target of the Dockerfile (hack/images/build.sh builds it; no GPU here).
# A ServiceAccount the e2e operator's policy allows beside `default`, as a platform lists its training identities.
E2E_SERVICE_ACCOUNT = "trainer-identity"
TRAINER_IMAGE = os.environ.get("TABJOB_E2E_TRAINER_IMAGE", "ghcr.io/tabjob/tabjob-trainer:0.1.0-cpu")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Operator:
    """`tabjob operator` as a subprocess against the test cluster; restartable and killable (test 5)."""

    def __init__(self, cluster: Cluster, log: Path) -> None:
        self.cluster = cluster
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_port = self.metrics_port = 0

    def start(self) -> None:
        self.health_port, self.metrics_port = _free_port(), _free_port()
        # The platform's policy as the chart mounts it: the defaults, plus the ServiceAccount the e2e jobs that need
        # a cloud identity run as (tests/e2e/test_storage_e2e.py).
        policy_dir = self.log.parent / "policy"
        policy_dir.mkdir(exist_ok=True)
        allowed = Policy.from_values({"serviceAccounts": ["default", E2E_SERVICE_ACCOUNT]})
        for key, value in allowed.to_data().items():
            (policy_dir / key).write_text(value)
        env = {
            **os.environ,
            "KUBECONFIG": str(self.cluster.kubeconfig),
            "TABJOB_TRAINER_IMAGE": TRAINER_IMAGE,
            # Installation settings an impatient cluster would choose: an image that cannot be pulled ends the job
            # after 30 s, a pod stuck Terminating on a lost node counts as gone 20 s past its grace period, and with
            # no autoscaler to add a node, an unschedulable pod makes its job Stalled after 15 s.
            "TABJOB_IMAGE_PULL_TIMEOUT": "30",
            "TABJOB_LOST_POD_TIMEOUT": "20",
            "TABJOB_UNSCHEDULABLE_GRACE": "15",
            "TABJOB_POLICY_DIR": str(policy_dir),
        }
        argv = [
            str(REPO / ".venv" / "bin" / "tabjob"), "operator", "--all-namespaces",
            "--retry-base-delay", "2", "--progress-interval", "5",
            "--metrics-port", str(self.metrics_port), "--health-port", str(self.health_port),
        ]  # fmt: skip
        self.proc = spawn(argv, log=self.log, env=env, cwd=REPO)  # ends with this session, even on SIGTERM
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the operator exited ({self.proc.returncode}); see {self.log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.3)
        raise AssertionError(f"the operator's liveness endpoint never answered; see {self.log}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.proc = None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            return resp.read().decode()


@pytest.fixture(scope="session")
def trainer_image(cluster: Cluster) -> str:
    """The trainer image's ref, once every node has it (imported by `make cluster` from tests/images)."""
    cluster.require_images(TRAINER_IMAGE)
    return TRAINER_IMAGE


@pytest.fixture(scope="session")
def crd(cluster: Cluster) -> Path:
    # The generated CRD, exactly as `make crds` wrote it (TABJOB_E2E_CRD points elsewhere for experiments).
    path = Path(os.environ.get("TABJOB_E2E_CRD", CRD))
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    cluster.wait_condition("crd/tabularjobs.tabjob.dev", "Established")
    # The second kind, batch scoring (tests/e2e/test_scoring_e2e.py).
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(PREDICTION_CRD))
    cluster.wait_condition("crd/tabularpredictions.tabjob.dev", "Established")
    return path


@pytest.fixture(scope="session")
def operator(
    cluster: Cluster, crd: Path, trainer_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    op = Operator(cluster, tmp_path_factory.mktemp("operator") / "operator.log")
    op.start()
    try:
        yield op
    finally:
        op.kill(signal.SIGTERM)
