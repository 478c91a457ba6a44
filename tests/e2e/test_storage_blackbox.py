"""The object-storage check written from the user documentation alone (tests/blackbox/check_object_storage.py: its
own bucket, a Secret, kubectl and the tabjob CLI), run against the session's operator as a user would run it after
`source .cluster/env`: it must pass every check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hack.cluster import network, s3
from hack.cluster.paths import NET_FILE
from hack.s3.seaweed import client_env
from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_the_black_box_object_storage_check_passes(cluster: Cluster, operator: Operator) -> None:
    net = network.load(NET_FILE)
    assert net is not None
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": f"{cluster.kubectl_path.parent}:{os.environ['PATH']}",
        **client_env(s3.host_endpoint(net)),
    }
    script = REPO / "tests" / "blackbox" / "check_object_storage.py"
    done = subprocess.run(
        [sys.executable, str(script)], env=env, cwd=REPO, capture_output=True, text=True, timeout=1800, check=False
    )
    assert done.returncode == 0, f"{done.stdout[-8000:]}\n{done.stderr[-3000:]}"
