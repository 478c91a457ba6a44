"""A table larger than one pod, end to end on the test bed (docs/sharding.md).

A Parquet dataset of 20 row groups goes into the test bed's bucket. Read whole, each trainer pod would need more than
its memory limit: `tabjob validate` refuses the job with `processes: 1` (three folds side by side, each rank reading
the whole table), giving both numbers and the smallest `processes` that fits. With GBM and XGB `processes: 3` over
three pods, each pod reads only its share of the row groups from the bucket and the job Succeeds with no restart; each
rank's peak resident memory, logged by the trainer when it ends with its container's cgroup peak, is under the pod's
limit.
The table is kept small (about 190 MB as float64) and the limits scaled down to it, so the suite stays in budget.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from hack.cluster import s3
from hack.s3.seaweed import SeaweedS3
from tabjob.contracts.results import FitEvent
from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import E2E_SERVICE_ACCOUNT, Operator
from tests.e2e.jobs import pods, s3_server, wait_condition
from tests.trainer.helpers import tabjob

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
FILES, FILE_ROWS, GROUP_ROWS, COLUMNS = 10, 80_000, 40_000, 30
POD_LIMIT_MIB = 1250  # each of the three pods: above a third of the table's need, below the whole table's
PEAK = re.compile(r"rank (\d+) peak memory: process ([\d.]+) MiB, cgroup ([\d.]+|unknown)")
READ = re.compile(r"rank (\d+) read (\d+) of (\d+) rows")


@pytest.fixture(scope="module")
def bucket(cluster: Cluster) -> SeaweedS3:
    """The test bed's S3 server, as the host reaches it."""
    return s3_server()


@pytest.fixture
def where(bucket: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> str:
    """This test's own prefix in the bucket; the host's CLI (`tabjob validate`) reaches it through the AWS variables."""
    for key, value in bucket.client_env().items():
        monkeypatch.setenv(key, value)
    return f"e2e-sharded-{uuid.uuid4().hex[:8]}"


def _upload(server: SeaweedS3, prefix: str) -> int:
    client = server.client()
    rng = np.random.default_rng(30)
    weights = rng.normal(size=COLUMNS)
    for i in range(FILES):
        x = rng.normal(size=(FILE_ROWS, COLUMNS))
        label = (x @ weights + rng.logistic(size=FILE_ROWS)) > 0
        table = pa.table({**{f"f{j}": x[:, j] for j in range(COLUMNS)}, "label": label.astype(np.int64)})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=GROUP_ROWS)
        client.put_object(Bucket=s3.BUCKET, Key=f"{prefix}/big/part-{i:05d}.parquet", Body=sink.getvalue().to_pybytes())
    return FILES * FILE_ROWS


def _job(name: str, prefix: str, processes: int) -> dict[str, Any]:
    config = {
        "processes": processes,
        "resources": {"cpus": processes},
        "hyperparameters": {"num_boost_round": 30, "learning_rate": 0.2},
    }
    return {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": name},
        "spec": {
            "serviceAccountName": E2E_SERVICE_ACCOUNT,
            "envFrom": [{"secretRef": {"name": s3.SECRET}}],
            "data": {"train": f"s3://{s3.BUCKET}/{prefix}/big/", "label": "label", "evalMetric": "roc_auc"},
            "resources": {"cpus": 3, "cpusPerPod": 1, "memory": f"{3 * POD_LIMIT_MIB}Mi"},
            "bagging": {"folds": 3},
            "models": {"GBM": [config], "XGB": [config]},
            "ensemble": {"size": 5},
            "runPolicy": {"backoffLimit": 0},
        },
    }


def test_a_table_larger_than_one_pod_trains_sharded_over_three_pods(
    cluster: Cluster,
    operator: Operator,
    namespace: str,
    bucket: SeaweedS3,
    where: str,
    tmp_path: Path,
) -> None:
    prefix = where
    rows = _upload(bucket, prefix)

    # Read whole by each of three ranks, no pod could hold it: refused before anything is created.
    whole = tmp_path / "whole.yaml"
    whole.write_text(yaml.safe_dump(_job("whole", prefix, 1)))
    refused = tabjob("validate", str(whole))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "spec.resources.memory: the table (800,000 rows x 31 columns" in refused.stderr, refused.stderr
    assert f"above its memory limit of {POD_LIMIT_MIB:,} MiB" in refused.stderr, refused.stderr
    assert re.search(r"processes: \d on every model config would fit", refused.stderr), refused.stderr
    sharded = tmp_path / "sharded.yaml"
    sharded.write_text(yaml.safe_dump(_job("sharded", prefix, 3)))
    valid = tabjob("validate", str(sharded))
    assert valid.returncode == 0 and "reads sharded" in valid.stdout, valid.stdout + valid.stderr

    cluster.apply(s3.secret(namespace), namespace)
    cluster.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": E2E_SERVICE_ACCOUNT}}, namespace)
    cluster.apply(_job("sharded", prefix, 3), namespace)
    st = wait_condition(cluster, namespace, "sharded", "Succeeded", timeout=900)
    assert st.get("restarts", 0) == 0 and st["bestModel"], st

    process_peaks: dict[int, float] = {}
    cgroup_peaks: dict[int, float] = {}
    shares: dict[int, int] = {}
    for pod in pods(cluster, namespace, "sharded"):
        assert pod["spec"]["containers"][0]["resources"]["limits"]["memory"] == f"{POD_LIMIT_MIB}Mi"
        log = cluster.kubectl("logs", "-n", namespace, pod["metadata"]["name"]).stdout
        for rank, read, total in READ.findall(log):
            assert int(total) == rows
            shares[int(rank)] = int(read)
        for rank, process, group in PEAK.findall(log):
            assert group != "unknown", log[-2000:]
            process_peaks[int(rank)] = float(process)
            cgroup_peaks[int(rank)] = float(group)
        if pod["metadata"]["labels"]["tabjob.dev/rank"] == "0":
            events = [FitEvent.model_validate_json(x) for x in log.splitlines() if x.startswith('{"t":')]
            started = next(e for e in events if e.event == "JobStarted")
            assert started.data is not None and started.data.reading == "sharded", started
    # Each pod read a third of the rows, never the whole table, and its rank peaked under the pod's limit. The cgroup's
    # peak also counts page cache (the libraries' files, the artifacts written), which the kernel reclaims at the
    # limit rather than kill, so it may touch the limit: that no pod was OOMKilled is the Succeeded job, no restart.
    assert sorted(shares) == [0, 1, 2] and sum(shares.values()) == rows
    assert all(abs(n - rows / 3) <= GROUP_ROWS for n in shares.values()), shares
    assert sorted(process_peaks) == [0, 1, 2], process_peaks
    assert all(p < POD_LIMIT_MIB for p in process_peaks.values()), process_peaks
    assert all(p <= POD_LIMIT_MIB for p in cgroup_peaks.values()), cgroup_peaks
    print(
        f"sharded e2e: each rank's peak memory (process {process_peaks}, cgroup {cgroup_peaks} MiB), "
        f"limit {POD_LIMIT_MIB} MiB, rows {shares}"
    )
