"""Batch scoring on the test bed (`make cluster`, `source .cluster/env`): scaling over pods, and 10 million rows.

A TabularJob (GBM, 2 folds) trains into the test bed's bucket; datasets of generated Parquet part files go there
too. Then TabularPredictions with `parallelism` 1, 2 and 3 score the scaling dataset, one after another, and one
with parallelism 3 scores the large one. Each is timed from `kubectl apply` to its `_SUCCESS` object in the bucket
(polled every half second) and read back from its pods' termination messages (ScoringSummary): rows scored, seconds
scoring, and seconds in the Predictor. The share outside predicting is 1 - (seconds in the Predictor, summed over the
pods, / parallelism) / the apply-to-_SUCCESS seconds: pod start, the model's download, reads and writes.

The test bed's three nodes are one 2-core machine, so pods beyond two share its cores: the scaling figure says what
the protocol costs, not what three real nodes would give. The operator runs here as a subprocess, as in the e2e tests.

    python -m bench.scoring_cluster [--scaling-rows 1000000] [--large-rows 10000000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.envelope import envelope, write
from bench.operator_scale import free_port, install_crd, start_operator
from hack.cluster import network, s3
from hack.cluster.paths import NET_FILE
from hack.s3.seaweed import SeaweedS3
from tabjob.contracts.scoring import ScoringSummary
from tests.e2e.conftest import TRAINER_IMAGE
from tests.trainer.helpers import mixed_table

REPO = Path(__file__).resolve().parents[1]
ROW_GROUP = 250_000


def kubectl(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["kubectl", *args], input=stdin, text=True, capture_output=True, check=False)
    if done.returncode:
        raise SystemExit(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def store() -> SeaweedS3:
    net = network.load(NET_FILE)
    if net is None:
        raise SystemExit("no test bed: make cluster, then source .cluster/env")
    host, port = s3.host_endpoint(net).removeprefix("http://").split(":")
    server = SeaweedS3(Path("/nonexistent"), host, int(port), pid=0)
    os.environ.update(server.client_env())
    return server


def upload(server: SeaweedS3, prefix: str, rows: int, per_file: int) -> None:
    """Part files of `per_file` rows (row groups of ROW_GROUP): mixed_table's features and an id."""
    client = server.client()
    for i, start in enumerate(range(0, rows, per_file)):
        n = min(per_file, rows - start)
        frame = mixed_table(n, seed=1000 + i).drop(columns=["label"]).assign(id=np.arange(start, start + n))
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink, row_group_size=ROW_GROUP)
        client.put_object(Bucket=s3.BUCKET, Key=f"{prefix}/part-{i:05d}.parquet", Body=sink.getvalue().to_pybytes())


def train(ns: str, server: SeaweedS3, prefix: str, work: Path) -> str:
    mixed_table(5000, seed=3).to_parquet(work / "train.parquet", index=False)
    server.client().put_object(
        Bucket=s3.BUCKET, Key=f"{prefix}/train/part-0.parquet", Body=(work / "train.parquet").read_bytes()
    )
    uri = f"s3://{s3.BUCKET}/{prefix}/model/"
    job = {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": "bench-model", "namespace": ns},
        "spec": {
            "envFrom": [{"secretRef": {"name": s3.SECRET}}],
            "data": {"train": f"s3://{s3.BUCKET}/{prefix}/train/", "label": "label"},
            "output": {"uri": uri},
            "resources": {"cpus": 2, "memory": "4Gi"},
            "models": {"GBM": [{"hyperparameters": {"num_boost_round": 200}}]},
            "bagging": {"folds": 2},
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        st = json.loads(kubectl("get", "tj", "bench-model", "-n", ns, "-o", "json")).get("status") or {}
        if st.get("phase") == "Succeeded":
            return uri
        if st.get("phase") == "Failed":
            raise SystemExit(f"the model job failed: {st.get('message')}")
        time.sleep(2)
    raise SystemExit("the model job did not finish in 15 minutes")


def score(ns: str, server: SeaweedS3, name: str, data: str, out_prefix: str, parallelism: int) -> dict[str, Any]:
    prediction = {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularPrediction",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "model": {"job": "bench-model"},
            "data": data,
            "output": {"uri": f"s3://{s3.BUCKET}/{out_prefix}/"},
            "passthroughColumns": ["id"],
            "parallelism": parallelism,
            "resources": {"cpus": 1, "memory": "3Gi"},
            "envFrom": [{"secretRef": {"name": s3.SECRET}}],
        },
    }
    client = server.client()
    started = time.monotonic()
    kubectl("apply", "-f", "-", stdin=json.dumps(prediction))
    while True:
        try:
            client.head_object(Bucket=s3.BUCKET, Key=f"{out_prefix}/_SUCCESS")
            break
        except client.exceptions.ClientError:
            pass
        st = json.loads(kubectl("get", "tp", name, "-n", ns, "-o", "json")).get("status") or {}
        if st.get("phase") == "Failed":
            raise SystemExit(f"{name} failed: {st.get('message')}")
        if time.monotonic() - started > 7200:
            raise SystemExit(f"{name}: no _SUCCESS after 2 hours")
        time.sleep(0.5)
    wall = time.monotonic() - started
    summaries = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pods = json.loads(kubectl("get", "pods", "-n", ns, "-l", f"tabjob.dev/prediction-name={name}", "-o", "json"))
        summaries = [
            ScoringSummary.model_validate_json(term["message"], by_name=False)
            for p in pods["items"]
            for c in (p.get("status") or {}).get("containerStatuses") or []
            if (term := (c.get("state") or {}).get("terminated")) and term.get("message")
        ]
        if len(summaries) >= parallelism:
            break
        time.sleep(1)
    rows = sum(x.rows_scored for x in summaries)
    predicting = sum(x.seconds_predicting for x in summaries)
    return {
        "parallelism": parallelism,
        "rows": rows,
        "apply_to_success_seconds": round(wall, 2),
        "rows_per_second": round(rows / wall, 1),
        "pods_seconds_scoring": [x.seconds_scoring for x in summaries],
        "pods_seconds_predicting": [x.seconds_predicting for x in summaries],
        "share_outside_predicting": round(1 - (predicting / parallelism) / wall, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scaling-rows", type=int, default=1_000_000)
    parser.add_argument("--large-rows", type=int, default=10_000_000)
    parser.add_argument("--parallelism", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args(argv)
    server = store()
    before = [round(x, 2) for x in os.getloadavg()]
    ns = f"bench-scoring-{uuid.uuid4().hex[:6]}"
    prefix = f"bench-scoring/{ns}"
    kubectl("create", "namespace", ns)
    install_crd()
    kubectl("apply", "-f", "-", stdin=json.dumps(s3.secret(ns)))
    env = {**os.environ, "TABJOB_TRAINER_IMAGE": TRAINER_IMAGE}
    op = start_operator(ns, REPO / "bench" / "results" / "scoring_cluster_operator.log", env, free_port())
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            train(ns, server, prefix, Path(tmp))
        upload(server, f"{prefix}/scaling", args.scaling_rows, 250_000)
        results["scaling"] = [
            score(ns, server, f"scale-{p}", f"s3://{s3.BUCKET}/{prefix}/scaling/", f"{prefix}/out-scale-{p}", p)
            for p in args.parallelism
        ]
        print(json.dumps(results["scaling"], indent=1), flush=True)
        upload(server, f"{prefix}/large", args.large_rows, 1_000_000)
        results["large"] = score(ns, server, "large", f"s3://{s3.BUCKET}/{prefix}/large/", f"{prefix}/out-large", 3)
        print(json.dumps(results["large"], indent=1), flush=True)
    finally:
        op.terminate()
        op.wait(timeout=30)
        subprocess.run(["kubectl", "delete", "namespace", ns, "--wait=false"], capture_output=True, check=False)
    doc = envelope(
        "scoring_cluster",
        {"load_average_before": before, "scaling_rows": args.scaling_rows, "large_rows": args.large_rows, **results},
        args=vars(args),
    )
    write("scoring_cluster", doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
