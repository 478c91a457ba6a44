"""Object storage end to end, on the test bed's S3 server (SeaweedFS, hack/cluster/s3.py), as a cloud user runs it.

A hive-partitioned Parquet dataset of several part files goes into a bucket. A TabularJob reads it as
`spec.data.train: s3://.../train/`, with its pods running as a ServiceAccount of its own and the credentials from a
Secret (`envFrom`), and lives in `spec.output.uri`. Rank 0 is killed once the bucket holds finished fits: the next
attempt resumes them from the bucket and the job Succeeds. `tabjob predict` on the bucket's run equals `tabjob
predict` on a local copy of it, and KServe's own storage initializer (kserve-storage 0.21, its own image) downloads
the run's MLServer export from the bucket into a pod that serves it: a V2 request gets `tabjob predict`'s answers.
A job whose Secret holds the wrong key fails at once with reason DataUnavailable, naming the URI and the identity.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from hack.cluster import s3
from hack.s3.seaweed import SeaweedS3
from tabjob.contracts.results import FitEvent
from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import E2E_SERVICE_ACCOUNT, TRAINER_IMAGE, Operator
from tests.e2e.jobs import condition, pods, s3_server, wait_condition, wait_phase
from tests.e2e.test_serving_e2e import SECURITY, _apply_all, _tabjob

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
INITIALIZER_IMAGE = "localhost/kserve/storage-initializer:0.21.0"
ROWS = 30


@pytest.fixture(scope="module")
def store(cluster: Cluster) -> SeaweedS3:
    """The test bed's S3 server, as the host reaches it."""
    return s3_server()


@pytest.fixture
def prefix(store: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> str:
    """This test's own prefix in the test bed's bucket; the host's CLI reaches the server through the AWS variables."""
    for key, value in store.client_env().items():
        monkeypatch.setenv(key, value)
    return f"e2e-{uuid.uuid4().hex[:8]}"


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    colour = rng.choice(["red", "green", "blue"], size=n)
    score = x[:, 0] - x[:, 1] + np.where(colour == "red", 1.0, -0.4) + rng.normal(scale=0.5, size=n)
    return pd.DataFrame({**{f"x{i}": x[:, i] for i in range(4)}, "colour": colour, "label": score > 0})


def _upload_dataset(store: SeaweedS3, prefix: str) -> pd.DataFrame:
    """Four part files under two hive partitions (region=eu, region=us); returns every row with its region."""
    client = store.client()
    frames = []
    for i, region in enumerate(["eu", "eu", "us", "us"]):
        part = _table(300, seed=i)
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), sink, row_group_size=100)
        key = f"{prefix}/train/region={region}/part-{i}.parquet"
        client.put_object(Bucket=s3.BUCKET, Key=key, Body=sink.getvalue().to_pybytes())
        frames.append(part.assign(region=region))
    client.put_object(Bucket=s3.BUCKET, Key=f"{prefix}/train/_SUCCESS", Body=b"")  # as Spark leaves it
    return pd.concat(frames, ignore_index=True)


def _job(name: str, prefix: str, secret: str, service_account: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "serviceAccountName": service_account,
        "envFrom": [{"secretRef": {"name": secret}}],
        "data": {"train": f"s3://{s3.BUCKET}/{prefix}/train/", "label": "label", "evalMetric": "roc_auc"},
        "output": {"uri": f"s3://{s3.BUCKET}/{prefix}/run/"},
        "resources": {"cpus": 2, "cpusPerPod": 1, "memory": "4Gi"},
        "models": {
            "GBM": [{"hyperparameters": {"num_boost_round": 30}}],
            "NN_TORCH": [{"hyperparameters": {"num_epochs": 120}}],
        },
        "bagging": {"folds": 2},
        "ensemble": {"size": 5},
        "export": {"format": "mlserver"},
        "runPolicy": {"backoffLimit": 2},
    }
    body.update(spec)
    return {"apiVersion": "tabjob.dev/v1alpha1", "kind": "TabularJob", "metadata": {"name": name}, "spec": body}


def _identity(cluster: Cluster, namespace: str) -> tuple[str, str]:
    """The job's credentials as a platform hands them out: a ServiceAccount of its own and the store's Secret."""
    cluster.apply(s3.secret(namespace), namespace)
    cluster.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": E2E_SERVICE_ACCOUNT}}, namespace)
    return s3.SECRET, E2E_SERVICE_ACCOUNT


def _finished_fits(store: SeaweedS3, prefix: str) -> int:
    listed = store.client().list_objects_v2(Bucket=s3.BUCKET, Prefix=f"{prefix}/run/fits/").get("Contents", [])
    return sum(1 for o in listed if o["Key"].endswith("/result.json"))


def test_a_job_reads_a_bucket_resumes_from_it_and_its_export_is_served_from_it(
    cluster: Cluster, operator: Operator, namespace: str, store: SeaweedS3, prefix: str, tmp_path: Path
) -> None:
    rows = _upload_dataset(store, prefix)
    secret, account = _identity(cluster, namespace)
    cluster.apply(_job("bucket", prefix, secret, account), namespace)
    wait_phase(cluster, namespace, "bucket", "Running", timeout=180)
    for pod in pods(cluster, namespace, "bucket"):
        assert pod["spec"]["serviceAccountName"] == account
        assert {"secretRef": {"name": secret}} in pod["spec"]["containers"][0]["envFrom"]

    # Rank 0 goes once the bucket holds finished fits (a node lost, a preemption).
    cluster.wait_for("finished fits in the bucket", lambda: _finished_fits(store, prefix) >= 2 or None, timeout=300)
    before = _finished_fits(store, prefix)
    cluster.kubectl("delete", "pod", "-n", namespace, "bucket-0", "--grace-period=0", "--force", check=False)
    st = wait_condition(cluster, namespace, "bucket", "Succeeded", timeout=600)
    uri = f"s3://{s3.BUCKET}/{prefix}/run/"
    assert st["restarts"] >= 1 and st["outputUri"] == uri, st
    assert st["exportPath"] == f"{uri}mlserver", st
    retried = next(p for p in pods(cluster, namespace, "bucket") if p["metadata"]["labels"]["tabjob.dev/rank"] == "0")
    log = cluster.kubectl("logs", "-n", namespace, retried["metadata"]["name"]).stdout
    events = [FitEvent.model_validate_json(x) for x in log.splitlines() if x.startswith('{"t":')]
    started = next(e for e in events if e.event == "JobStarted")
    # Every fit the bucket held when rank 0 went is reused, not trained again (each rank logs its own resumes).
    assert started.resumed is not None and started.resumed >= before, log[-3000:]

    # Readers take the URI: the same predictions as from a local copy of the run.
    features = rows.drop(columns=["label"]).iloc[:ROWS]
    features.to_csv(tmp_path / "rows.csv", index=False)
    local = tmp_path / "copy"
    client = store.client()
    for obj in client.list_objects_v2(Bucket=s3.BUCKET, Prefix=f"{prefix}/run/")["Contents"]:
        target = local / obj["Key"].removeprefix(f"{prefix}/run/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(client.get_object(Bucket=s3.BUCKET, Key=obj["Key"])["Body"].read())
    _tabjob("predict", str(local), str(tmp_path / "rows.csv"), "-o", str(tmp_path / "local.csv"))
    _tabjob("predict", uri, str(tmp_path / "rows.csv"), "-o", f"s3://{s3.BUCKET}/{prefix}/scores.csv")
    scored = client.get_object(Bucket=s3.BUCKET, Key=f"{prefix}/scores.csv")["Body"].read()
    (tmp_path / "bucket.csv").write_bytes(scored)
    expected = pd.read_csv(tmp_path / "local.csv")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "bucket.csv"), expected)

    # KServe: the export's storageUri and the S3 credential convention, then its storage initializer and MLServer.
    out = tmp_path / "kserve"
    _tabjob(
        "export", uri, "--format", "kserve", "--output", str(out), "--image", TRAINER_IMAGE,
        "--namespace", namespace, "--s3-secret", secret,
    )  # fmt: skip
    docs = {p.stem: yaml.safe_load(p.read_text()) for p in out.iterdir()}
    isvc = docs["inferenceservice"]
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == f"{uri}mlserver"
    assert docs["serviceaccount"]["secrets"] == [{"name": secret}]
    served = [docs["serviceaccount"], *_served_from_bucket(docs["servingruntime"], isvc, secret)]
    _apply_all(cluster, namespace, served)
    cluster.wait_condition("pod/bucket-predictor", "Ready", namespace=namespace, timeout=300)
    answer = _v2_answer(cluster, namespace, features)
    pd.testing.assert_frame_equal(answer, expected, check_exact=True, check_dtype=False)


def test_wrong_credentials_fail_at_once_naming_the_uri_and_the_identity(
    cluster: Cluster, operator: Operator, namespace: str, store: SeaweedS3, prefix: str
) -> None:
    _upload_dataset(store, prefix)
    wrong = s3.secret(namespace, name="wrong-keys")
    wrong["stringData"]["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    cluster.apply(wrong, namespace)
    cluster.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": E2E_SERVICE_ACCOUNT}}, namespace)
    cluster.apply(_job("denied", prefix, "wrong-keys", E2E_SERVICE_ACCOUNT), namespace)
    st = wait_condition(cluster, namespace, "denied", "Failed", timeout=300)
    failed = condition(st, "Failed")
    assert failed["reason"] == "DataUnavailable", failed
    assert f"s3://{s3.BUCKET}/{prefix}/train/" in failed["message"], failed
    assert "AWS_ACCESS_KEY_ID" in failed["message"], failed  # the identity used, never the secret
    assert "not-the-secret" not in json.dumps(st)
    assert st.get("restarts", 0) == 0  # a refusal is not retried


def _served_from_bucket(runtime: dict[str, Any], isvc: dict[str, Any], secret: str) -> list[dict[str, Any]]:
    """What KServe makes of the manifests for an s3:// model: its storage initializer as the init container, given
    the Secret's credentials (KServe's credential builder sets the same AWS variables from the ServiceAccount's
    Secret), downloading into an emptyDir at /mnt/models; then the runtime's container, and a Service."""
    (container,) = runtime["spec"]["containers"]
    labels = isvc["spec"]["predictor"]["labels"]
    uri = isvc["spec"]["predictor"]["model"]["storageUri"]
    limits = {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bucket-predictor", "labels": labels},
        "spec": {
            "serviceAccountName": isvc["spec"]["predictor"]["serviceAccountName"],
            "automountServiceAccountToken": False,
            "securityContext": {"fsGroup": 1000},
            "initContainers": [
                {
                    "name": "storage-initializer",
                    "image": INITIALIZER_IMAGE,
                    "imagePullPolicy": "Never",
                    "args": [uri, "/mnt/models"],
                    "envFrom": [{"secretRef": {"name": secret}}],
                    "resources": limits,
                    "securityContext": SECURITY,
                    "volumeMounts": [{"name": "model", "mountPath": "/mnt/models"}],
                }
            ],
            "containers": [
                {
                    **container,
                    "imagePullPolicy": "Never",
                    "resources": limits,
                    "volumeMounts": [{"name": "model", "mountPath": "/mnt/models", "readOnly": True}],
                }
            ],
            "volumes": [{"name": "model", "emptyDir": {}}],
        },
    }
    first = container["ports"][0]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "bucket-predictor", "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": first["name"], "port": 80, "targetPort": first["name"]}]},
    }
    return [service, pod]


V2_CLIENT = """
import json, sys, urllib.request
body = sys.argv[2]
req = urllib.request.Request(sys.argv[1], data=body.encode(), headers={"Content-Type": "application/json"})
print(urllib.request.urlopen(req, timeout=60).read().decode())
"""


def _v2_answer(cluster: Cluster, namespace: str, rows: pd.DataFrame) -> pd.DataFrame:
    inputs = []
    for name in rows.columns:
        values = rows[name]
        numeric = pd.api.types.is_numeric_dtype(values)
        datatype = "FP64" if numeric else "BYTES"
        inputs.append({"name": name, "datatype": datatype, "shape": [len(rows), 1], "data": values.tolist()})
    url = f"http://bucket-predictor.{namespace}.svc/v2/models/bucket/infer"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "v2-client"},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "client",
                    "image": TRAINER_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", V2_CLIENT, url, json.dumps({"inputs": inputs})],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                    "securityContext": SECURITY,
                }
            ],
        },
    }
    _apply_all(cluster, namespace, [pod])
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        phase = cluster.pod(namespace, "v2-client")["status"].get("phase")
        if phase in ("Succeeded", "Failed"):
            break
        time.sleep(1)
    log = cluster.kubectl("logs", "-n", namespace, "v2-client").stdout
    assert cluster.pod(namespace, "v2-client")["status"]["phase"] == "Succeeded", log
    reply = json.loads(log.strip().splitlines()[-1])
    return pd.DataFrame({o["name"]: o["data"] for o in reply["outputs"]})
