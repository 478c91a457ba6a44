"""Batch scoring end to end on the test bed's S3 server (SeaweedFS, hack/cluster/s3.py), as a cloud user runs it.

A TabularJob trains into `spec.output.uri`. A dataset of several Parquet part files goes into the bucket, and a
TabularPrediction with parallelism 3 names the job as its model: three scoring pods share the shards, one of them is
deleted mid-run (a preemption), its replacement skips the shards already committed, and the prediction Succeeds with
_SUCCESS written. The part files, read in name order, equal `tabjob predict` on the same data row for row. A second
prediction onto the same output is refused (OutputExists) before any row is scored.
"""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hack.cluster import s3
from hack.s3.seaweed import SeaweedS3
from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator
from tests.e2e.jobs import condition, wait_condition
from tests.e2e.test_serving_e2e import _tabjob
from tests.e2e.test_storage_e2e import _identity, _job, _table, _upload_dataset, store  # noqa: F401 (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
FILES, ROWS, GROUP = 6, 100_000, 50_000  # 12 row groups: 12 shards of 50,000 rows, 4 per pod


@pytest.fixture
def prefix(store: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: F811
    for key, value in store.client_env().items():
        monkeypatch.setenv(key, value)
    return f"e2e-score-{uuid.uuid4().hex[:8]}"


def _upload_scoring_data(store: SeaweedS3, prefix: str) -> pd.DataFrame:  # noqa: F811 (the fixture's name)
    client, frames = store.client(), []
    for i in range(FILES):
        part = (
            _table(ROWS, seed=100 + i)
            .drop(columns=["label"])
            .assign(region="eu", application_id=range(i * ROWS, (i + 1) * ROWS))
        )
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), sink, row_group_size=GROUP)
        client.put_object(Bucket=s3.BUCKET, Key=f"{prefix}/new/part-{i:05d}.parquet", Body=sink.getvalue().to_pybytes())
        frames.append(part)
    return pd.concat(frames, ignore_index=True)


def _prediction(name: str, prefix: str, secret: str, account: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": {"job": "scorer-model"},
        "data": f"s3://{s3.BUCKET}/{prefix}/new/",
        "output": {"uri": f"s3://{s3.BUCKET}/{prefix}/scores/"},
        "passthroughColumns": ["application_id"],
        "parallelism": 3,
        "resources": {"cpus": 1, "memory": "2Gi"},
        "serviceAccountName": account,
        "envFrom": [{"secretRef": {"name": secret}}],
        "runPolicy": {"backoffLimit": 2},
    }
    body.update(spec)
    return {"apiVersion": "tabjob.dev/v1alpha1", "kind": "TabularPrediction", "metadata": {"name": name}, "spec": body}


def _tp_status(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "tabularprediction", name, "-n", ns, "-o", "json").stdout
    return dict(json.loads(out).get("status") or {})


def _parts(store: SeaweedS3, prefix: str) -> list[str]:  # noqa: F811
    listed = store.client().list_objects_v2(Bucket=s3.BUCKET, Prefix=f"{prefix}/scores/").get("Contents", [])
    return sorted(o["Key"] for o in listed if o["Key"].rsplit("/", 1)[-1].startswith("part-"))


def _scoring_pods(cluster: Cluster, ns: str, name: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", "pods", "-n", ns, "-l", f"tabjob.dev/prediction-name={name}", "-o", "json").stdout
    return list(json.loads(out)["items"])


def test_three_pods_score_a_bucket_dataset_one_is_killed_and_the_output_equals_predict(
    cluster: Cluster,
    operator: Operator,
    namespace: str,
    store: SeaweedS3,  # noqa: F811 (the fixture)
    prefix: str,
    tmp_path: Path,
) -> None:
    _upload_dataset(store, prefix)  # the training data (test_storage_e2e's)
    rows = _upload_scoring_data(store, prefix)
    secret, account = _identity(cluster, namespace)
    small = {"models": {"GBM": [{"hyperparameters": {"num_boost_round": 30}}]}, "bagging": {"folds": 2}}
    job = _job("scorer-model", prefix, secret, account, **small)
    job["spec"].pop("export", None)
    cluster.apply(job, namespace)
    st = wait_condition(cluster, namespace, "scorer-model", "Succeeded", timeout=600)
    run_uri = st["outputUri"]

    cluster.apply(_prediction("nightly", prefix, secret, account), namespace)
    # Pod 1 goes once it committed its first shard (part 1; its others are 4, 7, 10): a preemption, a node lost.
    first = f"{prefix}/scores/part-00001.parquet"
    cluster.wait_for("pod 1's first part", lambda: first in _parts(store, prefix) or None, timeout=300)
    victim = next(
        p for p in _scoring_pods(cluster, namespace, "nightly") if p["metadata"]["labels"]["tabjob.dev/index"] == "1"
    )
    cluster.kubectl(
        "delete", "pod", "-n", namespace, victim["metadata"]["name"], "--grace-period=0", "--force", check=False
    )
    mid_run = f"{prefix}/scores/part-00010.parquet" not in _parts(store, prefix)
    cluster.wait_condition("tabularprediction/nightly", "Succeeded", namespace=namespace, timeout=600)
    st = _tp_status(cluster, namespace, "nightly")
    assert st["rowsScored"] == st["rowsTotal"] == FILES * ROWS, st
    assert st["shardsDone"] == st["shardsTotal"] == 12 and st["shardsFailed"] == 0, st
    assert st["modelUri"] == run_uri and st["outputUri"] == f"s3://{s3.BUCKET}/{prefix}/scores/", st
    assert {c["type"]: c["status"] for c in st["conditions"]}["Ready"] == "True"
    if mid_run:  # killed before its last part: replaced, and the replacement skipped what was committed
        assert st["restarts"] >= 1 and "nightly-1" in (st.get("lastFailure") or ""), st
        replaced = next(p for p in st["pods"] if p["index"] == 1)
        assert replaced["pod"].startswith("nightly-1-r"), st
        assert replaced["rowsScored"] <= replaced["rowsDone"] - ROWS // 2, st

    client = store.client()
    marker = json.loads(client.get_object(Bucket=s3.BUCKET, Key=f"{prefix}/scores/_SUCCESS")["Body"].read())
    assert marker["rows"] == FILES * ROWS and len(marker["parts"]) == 12
    keys = _parts(store, prefix)
    scored = pd.concat(
        [pd.read_parquet(io.BytesIO(client.get_object(Bucket=s3.BUCKET, Key=k)["Body"].read())) for k in keys],
        ignore_index=True,
    )
    assert list(scored["application_id"]) == list(rows["application_id"])
    _tabjob("predict", run_uri, f"s3://{s3.BUCKET}/{prefix}/new/", "-o", str(tmp_path / "predict.csv"))
    expected = pd.read_csv(tmp_path / "predict.csv")
    pd.testing.assert_frame_equal(scored.drop(columns=["application_id"]), expected, check_dtype=False)

    # The same output again, by another prediction: refused before a row is scored, the result kept.
    cluster.apply(_prediction("again", prefix, secret, account, parallelism=1), namespace)
    cluster.wait_condition("tabularprediction/again", "Failed", namespace=namespace, timeout=300)
    failed = condition(_tp_status(cluster, namespace, "again"), "Failed")
    assert failed["reason"] == "OutputExists" and "already holds a finished result" in failed["message"], failed
    assert _parts(store, prefix) == keys
