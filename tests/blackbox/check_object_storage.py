#!/usr/bin/env python3
"""Black-box check of tabjob's documented object-storage features on the local test cluster.

Written from the user documentation only (README.md, docs/storage.md, docs/serving.md, docs/identity.md, the CLI's
--help and `kubectl explain`), never from the code. It uses what a user of the docs would use: a bucket of its own
on the test bed's S3 server (botocore), Kubernetes Secrets, kubectl and the tabjob CLI.

Run it from anywhere, after `source .cluster/env` and with an operator running
(`.venv/bin/tabjob operator --all-namespaces --image ghcr.io/tabjob/tabjob-trainer:0.1.0-cpu`):

    source .cluster/env && .venv/bin/python tests/blackbox/check_object_storage.py

It takes no arguments, prints PASS/FAIL per check with its evidence, exits 1 when any check fails (2 when the
set-up itself fails), and deletes its namespace, its bucket's objects and its bucket at the end.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import botocore.session
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from botocore.config import Config

ROOT = Path(__file__).resolve().parents[2]
TABJOB = str(ROOT / ".venv" / "bin" / "tabjob")
SUFFIX = secrets.token_hex(3)
BUCKET = f"tabjob-bb-{SUFFIX}"
NS = f"tabjob-bb-{SUFFIX}"
TRAIN_PREFIX = "bb/train/"
SCORE_PREFIX = "bb/score/"
EMPTY_PREFIX = "bb/empty/"
RUN_PREFIX = "bb/runs/main/"
HALF_PREFIX = "bb/runs/half-written/"
NEVER_PREFIX = "bb/runs/never-written/"
WRONG_RUN_PREFIX = "bb/runs/wrong-key/"
EMPTY_RUN_PREFIX = "bb/runs/empty-data/"
TRAIN_URI = f"s3://{BUCKET}/{TRAIN_PREFIX}"
SCORE_URI = f"s3://{BUCKET}/{SCORE_PREFIX}"
EMPTY_URI = f"s3://{BUCKET}/{EMPTY_PREFIX}"
RUN_URI = f"s3://{BUCKET}/{RUN_PREFIX}"
HALF_URI = f"s3://{BUCKET}/{HALF_PREFIX}"
NEVER_URI = f"s3://{BUCKET}/{NEVER_PREFIX}"
JOB_TIMEOUT_S = 1200
EMPTY_NAMES = ("README.md", "manifest.json", "_SUCCESS", "_temporary")

RESULTS: list[tuple[str, bool, str]] = []


# ---------------------------------------------------------------------------------------------------------- helpers


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def record(name: str, ok: bool, evidence: str) -> bool:
    RESULTS.append((name, ok, evidence))
    print(f"\n{'PASS' if ok else 'FAIL'}: {name}", flush=True)
    for line in evidence.rstrip().splitlines():
        print(f"    {line}", flush=True)
    print(flush=True)
    return ok


def run(
    cmd: list[str],
    *,
    timeout: float = 600,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    quiet: bool = False,
) -> subprocess.CompletedProcess[str]:
    if not quiet:
        log("$ " + " ".join(cmd))
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, input=stdin)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return subprocess.CompletedProcess(cmd, 124, out, err + f"\n(timed out after {timeout}s)")


def shown(p: subprocess.CompletedProcess[str], limit: int = 3000) -> str:
    text = f"rc={p.returncode}\nstdout: {p.stdout.strip()}\nstderr: {p.stderr.strip()}"
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2 :]


def kubectl(
    *args: str, stdin: str | None = None, timeout: float = 120, quiet: bool = False
) -> subprocess.CompletedProcess[str]:
    return run(["kubectl", *args], stdin=stdin, timeout=timeout, quiet=quiet)


def s3_client() -> Any:
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ["AWS_ENDPOINT_URL"]
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return botocore.session.get_session().create_client(
        "s3", endpoint_url=endpoint, region_name=region, config=Config(s3={"addressing_style": "path"})
    )


def list_keys(s3: Any, prefix: str) -> dict[str, int]:
    keys: dict[str, int] = {}
    token = None
    while True:
        kw: dict[str, Any] = {"Bucket": BUCKET, "Prefix": prefix}
        if token:
            kw["ContinuationToken"] = token
        page = s3.list_objects_v2(**kw)
        for obj in page.get("Contents", []):
            keys[obj["Key"]] = obj["Size"]
        if not page.get("IsTruncated"):
            return keys
        token = page["NextContinuationToken"]


def put(s3: Any, key: str, body: bytes) -> None:
    s3.put_object(Bucket=BUCKET, Key=key, Body=body)


def parquet_bytes(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), buf)
    return buf.getvalue()


def read_table_file(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


# -------------------------------------------------------------------------------------------------------- the data


def make_rows(rng: np.random.Generator, n: int, segment: str) -> pd.DataFrame:
    """A label that depends on the hive partition: in segment b the rule is flipped, so a model that did not get the
    `segment` column from the directory names cannot do better than chance overall."""
    x1 = rng.normal(size=n)
    x2 = rng.normal(size=n)
    x3 = rng.integers(0, 10, size=n)
    color = rng.choice(["red", "green", "blue"], size=n)
    positive = (x1 + 0.5 * x2) > 0
    if segment == "b":
        positive = ~positive
    return pd.DataFrame(
        {"x1": x1, "x2": x2, "x3": x3.astype("int64"), "color": color, "label": np.where(positive, "yes", "no")}
    )


def upload_data(s3: Any, local: Path) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    train_parts = {
        "segment=a/part-00000.parquet": 700,
        "segment=a/part-00001.parquet": 600,
        "segment=b/part-00000.parquet": 700,
        "segment=b/part-00001.parquet": 600,
    }
    score_parts = {"segment=a/part-00000.parquet": 150, "segment=b/part-00000.parquet": 130}
    truth: list[str] = []
    for prefix, parts, with_label in ((TRAIN_PREFIX, train_parts, True), (SCORE_PREFIX, score_parts, False)):
        for name, n in sorted(parts.items()):
            df = make_rows(rng, n, name.split("/")[0].split("=")[1])
            if not with_label:
                truth.extend(df["label"])
                df = df.drop(columns=["label"])
            body = parquet_bytes(df)
            put(s3, prefix + name, body)
            dest = local / prefix / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(body)
        # what docs/storage.md says a reader skips: names that start with _ or . (files and directories alike) and
        # files with other suffixes (a README, a JSON manifest). The skipped Parquet files have another schema,
        # so reading any of them would refuse the dataset ("files whose columns disagree are refused").
        put(s3, prefix + "_SUCCESS", b"")
        put(s3, prefix + "README.md", b"# this dataset has two segments\n")
        put(s3, prefix + "manifest.json", b'{"segments": ["a", "b"]}\n')
        put(s3, prefix + "_temporary/part-00099.parquet", parquet_bytes(pd.DataFrame({"zzz": ["x", "y"]})))
        put(s3, prefix + "segment=a/.part-00000.parquet", parquet_bytes(pd.DataFrame({"zzz": [1.5]})))
        put(s3, prefix + "segment=a/.part-00000.parquet.crc", b"crc")
    # a prefix holding no data files at all, only things the docs say are skipped
    put(s3, EMPTY_PREFIX + "README.md", b"no data here\n")
    put(s3, EMPTY_PREFIX + "_SUCCESS", b"")
    put(s3, EMPTY_PREFIX + "manifest.json", b"{}\n")
    put(s3, EMPTY_PREFIX + "_temporary/part-00000.parquet", parquet_bytes(pd.DataFrame({"x1": [1.0]})))
    # a run that was started but never committed: a leaderboard and a fit record, no _COMMITTED.json
    put(s3, HALF_PREFIX + "leaderboard.json", b'[{"model": "GBM", "score": 0.9}]\n')
    put(s3, HALF_PREFIX + "fits/GBM.t0/result.json", b'{"status": "Succeeded"}\n')
    return {"train_rows": sum(train_parts.values()), "score_rows": sum(score_parts.values()), "truth": truth}


# --------------------------------------------------------------------------------------------------------- the jobs


def job_manifest(name: str, secret: str, train: str, output: str, *, export: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "envFrom": [{"secretRef": {"name": secret}}],
        "data": {"train": train, "label": "label"},
        "output": {"uri": output},
        "resources": {"cpus": 1, "memory": "1Gi"},
        "models": {
            "GBM": [
                {"hyperparameters": {"num_boost_round": 40}},
                {"hyperparameters": {"num_boost_round": 40, "num_leaves": 7}},
            ]
        },
    }
    if export:
        spec["export"] = {"format": "mlserver"}
    return {
        "apiVersion": "tabjob.dev/v1alpha1",
        "kind": "TabularJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def get_job(name: str) -> dict[str, Any]:
    p = kubectl("-n", NS, "get", "tabularjob", name, "-o", "json", quiet=True)
    return json.loads(p.stdout) if p.returncode == 0 else {}


def pods_of(name: str) -> list[tuple[str, str]]:
    p = kubectl("-n", NS, "get", "pods", "-l", f"tabjob.dev/job-name={name}", "-o", "json", quiet=True)
    if p.returncode != 0:
        return []
    return [(i["metadata"]["name"], i["metadata"]["uid"]) for i in json.loads(p.stdout).get("items", [])]


def wait_all(names: list[str], timeout: float) -> dict[str, dict[str, Any]]:
    """Polls each job until Succeeded or Failed; remembers every pod (by uid) it ever saw per job."""
    deadline = time.time() + timeout
    final: dict[str, dict[str, Any]] = {}
    seen_pods: dict[str, set[tuple[str, str]]] = {n: set() for n in names}
    last: dict[str, str] = {}
    logs: dict[str, str] = {}
    while time.time() < deadline and len(final) < len(names):
        for n in names:
            if n in final:
                continue
            seen_pods[n].update(pods_of(n))
            # the pods may be gone once the job has ended, so keep the latest log seen while it ran
            lg = kubectl("-n", NS, "logs", "-l", f"tabjob.dev/job-name={n}", "--tail=60", quiet=True)
            if lg.returncode == 0 and lg.stdout.strip():
                logs[n] = lg.stdout
            obj = get_job(n)
            st = obj.get("status", {}) or {}
            phase = st.get("phase", "")
            prog = st.get("progress", {})
            line = f"{phase} {json.dumps(prog)} {st.get('message', '')}"
            if line != last.get(n):
                log(f"job {n}: {line}")
                last[n] = line
            if phase in ("Succeeded", "Failed"):
                obj["_pods_seen"] = sorted(seen_pods[n])
                obj["_last_log"] = logs.get(n, "")
                final[n] = obj
        if len(final) < len(names):
            time.sleep(5)
    for n in names:
        if n not in final:
            obj = get_job(n)
            obj["_pods_seen"] = sorted(seen_pods[n])
            obj["_last_log"] = logs.get(n, "")
            obj["_timed_out"] = True
            final[n] = obj
    return final


def conditions_text(obj: dict[str, Any]) -> str:
    conds = (obj.get("status") or {}).get("conditions") or []
    return "\n".join(
        f"  {c.get('type')}={c.get('status')} reason={c.get('reason')} message={c.get('message')}" for c in conds
    )


# --------------------------------------------------------------------------------------------------------- checks


def check_data_uploaded(s3: Any, info: dict[str, Any]) -> None:
    keys = list_keys(s3, TRAIN_PREFIX)
    parts = sorted(k for k in keys if k.endswith(".parquet") and "/_" not in k and "/." not in k)
    ok = len(parts) == 4 and any("segment=a/" in k for k in parts) and any("segment=b/" in k for k in parts)
    record(
        "1. bucket created, Parquet dataset of several part files under hive partition directories uploaded",
        ok,
        f"bucket {BUCKET}; objects under {TRAIN_PREFIX}:\n"
        + "\n".join(f"  {k} ({v} bytes)" for k, v in sorted(keys.items()))
        + f"\ntraining rows {info['train_rows']}; scoring rows {info['score_rows']} under {SCORE_PREFIX}",
    )


def check_main_job(s3: Any, job: dict[str, Any], info: dict[str, Any]) -> bool:
    st = job.get("status", {}) or {}
    phase = st.get("phase")
    ok_phase = phase == "Succeeded" and not job.get("_timed_out")
    # The job has Succeeded by now: one check of the docs' wait (--timeout=0s) agrees, it need not wait.
    wait = kubectl("-n", NS, "wait", "--for=condition=Succeeded", "tabularjob/s3job", "--timeout=0s")
    record(
        "3a. the job reading s3://.../train/ (envFrom the Secret) Succeeds; `kubectl wait` for its Succeeded "
        "condition (the docs' wait) agrees",
        ok_phase and wait.returncode == 0,
        f"phase={phase} timed_out={job.get('_timed_out', False)} bestModel={st.get('bestModel')} "
        f"score={st.get('score')} evalMetric={st.get('evalMetric')}\nconditions:\n{conditions_text(job)}\n"
        f"kubectl wait: {shown(wait)}",
    )
    if not ok_phase:
        lg = run([TABJOB, "logs", "s3job", "-n", NS, "--tail", "40"])
        print("    (evidence, not a check) `tabjob logs` of the failed main job:\n" + shown(lg, 6000), flush=True)
        return False

    # the hive column must have been read: the label flips with `segment`
    models = st.get("models") or []
    record(
        "3b. the hive partition column `segment` was read as a feature (the label flips with it, so only a "
        "model that has it scores well above chance)",
        (st.get("score") or 0) >= 0.85
        if st.get("evalMetric") in ("accuracy", "roc_auc", "balanced_accuracy", "f1")
        else False,
        f"evalMetric={st.get('evalMetric')} best score={st.get('score')}\nleaderboard: "
        + json.dumps([{k: m.get(k) for k in ("model", "name", "score", "valScore") if k in m} for m in models]),
    )

    want = RUN_URI.rstrip("/")
    out_uri = (st.get("outputUri") or "").rstrip("/")
    export_path = (st.get("exportPath") or "").rstrip("/")
    status_cli = run([TABJOB, "status", "s3job", "-n", NS])
    record(
        "3c. status.outputUri names the run's URI, status.exportPath names <uri>/mlserver, and `tabjob status` "
        "shows the URI",
        out_uri == want and export_path == want + "/mlserver" and want in status_cli.stdout,
        f"spec.output.uri={RUN_URI}\nstatus.outputUri={st.get('outputUri')}\n"
        f"status.exportPath={st.get('exportPath')}\n`tabjob status s3job -n {NS}`:\n{shown(status_cli, 6000)}",
    )

    keys = list_keys(s3, RUN_PREFIX)
    commit_key = RUN_PREFIX + "_COMMITTED.json"
    evidence = [f"{len(keys)} objects under s3://{BUCKET}/{RUN_PREFIX}:"] + [
        f"  {k[len(RUN_PREFIX) :]} ({v})" for k, v in sorted(keys.items())
    ]
    listed: dict[str, int | None] = {}
    ok = commit_key in keys
    if ok:
        commit = json.loads(s3.get_object(Bucket=BUCKET, Key=commit_key)["Body"].read())
        evidence.append("_COMMITTED.json (start): " + json.dumps(commit)[:800])
        listed = committed_files(commit)
        evidence.append(f"files listed in _COMMITTED.json: {len(listed)}")
        missing = [p for p in listed if RUN_PREFIX + p not in keys]
        wrong_size = [
            (p, s, keys.get(RUN_PREFIX + p))
            for p, s in listed.items()
            if s is not None and RUN_PREFIX + p in keys and keys[RUN_PREFIX + p] != s
        ]
        needed = ["leaderboard.json", "spec.json", "models.json", "mlserver/model-settings.json"]
        absent = [n for n in needed if n not in listed]
        evidence.append(f"listed but missing in the bucket: {missing}")
        evidence.append(f"listed with another size than the bucket's: {wrong_size}")
        evidence.append(f"documented files absent from the listing: {absent}")
        ok = bool(listed) and not missing and not wrong_size and not absent
    else:
        evidence.append("no _COMMITTED.json")
    record(
        "3d. the bucket holds the committed run: _COMMITTED.json lists the run's files with their sizes, each "
        "present with that size, including leaderboard.json, models.json, spec.json and the mlserver/ export",
        ok,
        "\n".join(evidence),
    )
    return True


def committed_files(commit: Any) -> dict[str, int | None]:
    """The docs say the commit object is 'the list of the run's files with their sizes'; accept the shapes that
    sentence allows: {path: size}, [{path|name|key, size}], or either under a 'files' key."""
    body = commit.get("files", commit) if isinstance(commit, dict) else commit
    out: dict[str, int | None] = {}
    if isinstance(body, dict):
        for k, v in body.items():
            if isinstance(v, int):
                out[k] = v
            elif isinstance(v, dict) and "size" in v:
                out[k] = v["size"]
    elif isinstance(body, list):
        for e in body:
            if isinstance(e, dict):
                p = e.get("path") or e.get("name") or e.get("key")
                if p:
                    out[p] = e.get("size", e.get("bytes"))
            elif isinstance(e, (list, tuple)) and len(e) == 2:
                out[str(e[0])] = e[1]
    return out


def check_secret_not_leaked(s3: Any, secret_value: str) -> None:
    hits = []
    for key in list_keys(s3, RUN_PREFIX):
        body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        if secret_value.encode() in body:
            hits.append(key)
    spec = json.loads(s3.get_object(Bucket=BUCKET, Key=RUN_PREFIX + "spec.json")["Body"].read())
    job_spec = spec.get("spec", spec)
    sa = job_spec.get("serviceAccountName")
    no_creds = not job_spec.get("envFrom") and not job_spec.get("env")
    record(
        "3e. the run in the bucket holds no secret; its spec.json keeps the job's env/envFrom out and names no "
        "ServiceAccount other than the one the pods ran as (`default`: the job named none, so absent or "
        "`default`)",
        not hits and no_creds and sa in (None, "default"),
        f"objects containing the secret access key: {hits}\nspec.json serviceAccountName={sa!r} "
        f"env={job_spec.get('env')!r} envFrom={job_spec.get('envFrom')!r}\nspec.json: {json.dumps(spec)[:1500]}",
    )


def check_predict(s3: Any, tmp: Path, info: dict[str, Any]) -> None:
    env = dict(os.environ, TABJOB_RUN_CACHE=str(tmp / "run-cache"))
    out_csv = tmp / "pred-s3.csv"
    p = run([TABJOB, "predict", RUN_URI, SCORE_URI, "--output", str(out_csv)], env=env)
    rows = None
    df_s3 = None
    if p.returncode == 0 and out_csv.exists():
        df_s3 = pd.read_csv(out_csv)
        rows = len(df_s3)
    ok = p.returncode == 0 and rows == info["score_rows"] and df_s3 is not None and "prediction" in df_s3.columns
    acc = None
    if ok and df_s3 is not None:
        acc = float((df_s3["prediction"].astype(str).to_numpy() == np.array(info["truth"])).mean())
    record(
        "4a. `tabjob predict <run URI> <s3 prefix> --output local.csv` gives one prediction per row",
        ok,
        f"{shown(p)}\nrows in: {info['score_rows']}, rows out: {rows}; columns: "
        f"{list(df_s3.columns) if df_s3 is not None else None}\naccuracy against the known labels, rows in path "
        f"order: {acc}\nhead:\n{df_s3.head(3).to_string() if df_s3 is not None else ''}",
    )
    if acc is not None:
        record(
            "4b. the predictions line up with the input rows in path order (segment=a then segment=b) and are "
            "right on most rows",
            acc >= 0.85,
            f"accuracy {acc:.4f} on {rows} rows",
        )
    cache = tmp / "run-cache"
    cached = [str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()] if cache.exists() else []
    record(
        "4c. the run was fetched into the documented local cache (TABJOB_RUN_CACHE)",
        bool(cached),
        f"{len(cached)} files under {cache}; some: {cached[:8]}",
    )

    # the same predictions written to an object
    out_key = "bb/predictions/pred.parquet"
    p2 = run([TABJOB, "predict", RUN_URI, SCORE_URI, "--output", f"s3://{BUCKET}/{out_key}"], env=env)
    df_obj = None
    try:
        df_obj = pd.read_parquet(io.BytesIO(s3.get_object(Bucket=BUCKET, Key=out_key)["Body"].read()))
    except Exception as exc:
        p2 = subprocess.CompletedProcess(p2.args, p2.returncode, p2.stdout, p2.stderr + f"\nreading back: {exc}")
    same = df_obj is not None and df_s3 is not None and compare(df_s3, df_obj)
    record(
        "4d. `tabjob predict <run URI> <s3 prefix> --output s3://.../pred.parquet` writes the same predictions "
        "as an object",
        p2.returncode == 0 and same,
        f"{shown(p2)}\nrows: {None if df_obj is None else len(df_obj)}; equal to 4a: {same}",
    )

    # a local copy of the run, downloaded object by object, and a local copy of the data
    local_run = tmp / "run-local"
    for key in list_keys(s3, RUN_PREFIX):
        dest = local_run / key[len(RUN_PREFIX) :]
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    out_local = tmp / "pred-local.csv"
    p3 = run([TABJOB, "predict", str(local_run), str(tmp / "data" / SCORE_PREFIX), "--output", str(out_local)])
    df_local = pd.read_csv(out_local) if p3.returncode == 0 and out_local.exists() else None
    same = df_local is not None and df_s3 is not None and compare(df_s3, df_local)
    record(
        "4e. `tabjob predict` on a local copy of the run (objects downloaded) and a local copy of the data gives "
        "the same predictions as on the URIs",
        p3.returncode == 0 and same,
        f"{shown(p3)}\nrows: {None if df_local is None else len(df_local)}; equal to 4a: {same}",
    )


def compare(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        log(f"compare: columns {list(a.columns)} vs {list(b.columns)}, rows {len(a)} vs {len(b)}")
        return False
    for c in a.columns:
        x, y = a[c], b[c]
        if pd.api.types.is_float_dtype(x) and pd.api.types.is_float_dtype(y):
            if not np.allclose(x.to_numpy(), y.to_numpy(), rtol=0, atol=1e-9):
                return False
        elif not (x.astype(str).to_numpy() == y.astype(str).to_numpy()).all():
            return False
    return True


def check_kserve(s3: Any, tmp: Path) -> None:
    out = tmp / "kserve"
    p = run([TABJOB, "export", RUN_URI, "--format", "kserve", "--output", str(out)])
    docs: list[dict[str, Any]] = []
    if out.exists():
        for f in sorted(out.glob("*.yaml")):
            docs.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
    isvc = next((d for d in docs if d.get("kind") == "InferenceService"), None)
    storage = sa = None
    if isvc:
        pred = isvc.get("spec", {}).get("predictor", {})
        storage = pred.get("model", {}).get("storageUri") or pred.get("storageUri")
        sa = pred.get("serviceAccountName")
    want = RUN_URI.rstrip("/") + "/mlserver"
    in_bucket = (
        bool(storage) and list_keys(s3, storage.split(f"s3://{BUCKET}/", 1)[-1].rstrip("/") + "/") != {}
        if storage and storage.startswith(f"s3://{BUCKET}/")
        else False
    )
    record(
        "5a. `tabjob export <run URI> --format kserve --output DIR` writes an InferenceService whose storageUri "
        "is the run's export in my bucket (<uri>/mlserver, which holds objects)",
        p.returncode == 0 and storage == want and in_bucket,
        f"{shown(p)}\nfiles: {sorted(x.name for x in out.iterdir()) if out.exists() else None}\n"
        f"storageUri={storage} (want {want}); objects there: {in_bucket}\n"
        f"inferenceservice: {json.dumps(isvc)[:1500] if isvc else None}",
    )
    out3 = tmp / "kserve-sa"
    p3 = run(
        [TABJOB, "export", RUN_URI, "--format", "kserve", "--service-account", "model-reader", "--output", str(out3)]
    )
    sa3 = None
    if out3.exists():
        for f in sorted(out3.glob("*.yaml")):
            for d in yaml.safe_load_all(f.read_text()):
                if d and d.get("kind") == "InferenceService":
                    sa3 = d.get("spec", {}).get("predictor", {}).get("serviceAccountName")
    record(
        "5b. the predictor runs as the ServiceAccount the job ran as (`default`; an absent serviceAccountName is "
        "the namespace's default), and as --service-account NAME when given",
        sa in (None, "default") and p3.returncode == 0 and sa3 == "model-reader",
        f"without the flag: predictor.serviceAccountName={sa!r}\nwith --service-account model-reader: "
        f"{shown(p3)}\npredictor.serviceAccountName={sa3!r}",
    )

    out2 = tmp / "kserve-secret"
    p2 = run([TABJOB, "export", RUN_URI, "--format", "kserve", "--s3-secret", "s3-credentials", "--output", str(out2)])
    docs2: list[dict[str, Any]] = []
    if out2.exists():
        for f in sorted(out2.glob("*.yaml")):
            docs2.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
    sas = [d for d in docs2 if d.get("kind") == "ServiceAccount"]
    lists_secret = any(any(s.get("name") == "s3-credentials" for s in (d.get("secrets") or [])) for d in sas)
    isvc2 = next((d for d in docs2 if d.get("kind") == "InferenceService"), {})
    sa2 = isvc2.get("spec", {}).get("predictor", {}).get("serviceAccountName")
    record(
        "5c. with --s3-secret s3-credentials it also writes a ServiceAccount listing that Secret, used by the "
        "predictor",
        p2.returncode == 0 and lists_secret and bool(sas) and sa2 == sas[0]["metadata"]["name"],
        f"{shown(p2)}\nServiceAccounts: {json.dumps(sas)}\npredictor.serviceAccountName={sa2!r}",
    )


def refetch(name: str, earlier: dict[str, Any]) -> dict[str, Any]:
    """The job and its pods again, minutes after it ended: a retry would have made a new pod or moved the phase."""
    obj = get_job(name)
    obj["_pods_seen"] = sorted(set(map(tuple, earlier.get("_pods_seen", []))) | set(pods_of(name)))
    obj["_last_log"] = earlier.get("_last_log", "")
    return obj


def check_wrong_key(job: dict[str, Any], access_key: str, wrong_secret: str) -> None:
    st = job.get("status", {}) or {}
    conds = st.get("conditions") or []
    reasons = {c.get("reason") for c in conds}
    texts = [st.get("message") or "", st.get("lastFailure") or ""] + [c.get("message") or "" for c in conds]
    blob = "\n".join(texts)
    masked_ok = access_key[:4] in blob and access_key[-4:] in blob
    names_uri = TRAIN_URI.rstrip("/") in blob
    leaks = wrong_secret in blob or wrong_secret in job.get("_last_log", "")
    pods = job.get("_pods_seen", [])
    restarts = st.get("restarts") or 0
    pod_log = job.get("_last_log", "")
    tries_mentioned = any(w in (pod_log + blob).lower() for w in ("attempts", "tried ", "retrying", "retry"))
    ok = (
        st.get("phase") == "Failed"
        and "DataUnavailable" in reasons
        and names_uri
        and masked_ok
        and not leaks
        and restarts == 0
        and len({uid for _, uid in pods}) == 1
        and not st.get("nextRetryTime")
        and not tries_mentioned
    )
    record(
        "6a. a job whose Secret has a wrong secret key Fails with reason DataUnavailable, a message naming the "
        "URI and the identity (access key's first/last four characters, no secret), and no retries (one pod "
        "ever, restarts 0, no nextRetryTime, still Failed minutes later, no retry in its log or message)",
        ok,
        f"phase={st.get('phase')} restarts={restarts} nextRetryTime={st.get('nextRetryTime')} "
        f"pods ever seen (name, uid)={pods}\n"
        f"status.message={st.get('message')!r}\nstatus.lastFailure={st.get('lastFailure')!r}\n"
        f"conditions:\n{conditions_text(job)}\n"
        f"reason DataUnavailable present: {'DataUnavailable' in reasons}; names {TRAIN_URI}: {names_uri}; "
        f"names identity ({access_key[:4]}...{access_key[-4:]}): {masked_ok}; "
        f"full access key id in message: {access_key in blob}; wrong secret leaked: {leaks}; "
        f"log/status mention retries: {tries_mentioned}\n"
        f"last log of its pod seen while it ran (kubectl logs):\n{pod_log[-3000:]}",
    )
    lg = run([TABJOB, "logs", "s3wrongkey", "-n", NS, "--tail", "30"])
    print(
        "    (observation, not a check) `tabjob logs s3wrongkey` after the job failed:\n    "
        + shown(lg, 3000).replace("\n", "\n    "),
        flush=True,
    )


def check_empty_job(job: dict[str, Any]) -> None:
    st = job.get("status", {}) or {}
    conds = st.get("conditions") or []
    blob = "\n".join([st.get("message") or "", st.get("lastFailure") or ""] + [c.get("message") or "" for c in conds])
    restarts = st.get("restarts") or 0
    names_found = any(n in blob for n in EMPTY_NAMES)
    ok = (
        st.get("phase") == "Failed"
        and EMPTY_URI.rstrip("/") in blob
        and names_found
        and restarts == 0
        and len({uid for _, uid in job.get("_pods_seen", [])}) == 1
        and not st.get("nextRetryTime")
    )
    record(
        "6d. a job whose data prefix holds no data files Fails at once (no retries) with a message naming the "
        "prefix and what it found",
        ok,
        f"phase={st.get('phase')} restarts={restarts} nextRetryTime={st.get('nextRetryTime')} "
        f"pods ever seen={job.get('_pods_seen')}\n"
        f"status.message={st.get('message')!r}\nconditions:\n{conditions_text(job)}",
    )


def check_uncommitted(tmp: Path) -> None:
    for label, uri in (
        ("half-written (leaderboard.json and a fit record, no commit object)", HALF_URI),
        ("never written (nothing under the prefix)", NEVER_URI),
    ):
        p = run([TABJOB, "predict", uri, SCORE_URI, "--output", str(tmp / "never.csv")])
        msg = p.stdout + p.stderr
        ok = (
            p.returncode != 0
            and "not a finished run" in msg
            and "_COMMITTED.json" in msg
            and uri.rstrip("/") in msg
            and "Traceback" not in msg
            and not (tmp / "never.csv").exists()
        )
        record(
            f"6b. `tabjob predict` of a run URI that was never committed, {label}, is refused with "
            f"`<uri>: not a finished run (no _COMMITTED.json)`",
            ok,
            shown(p),
        )
    p = run([TABJOB, "export", HALF_URI, "--format", "kserve", "--output", str(tmp / "kserve-half")])
    msg = p.stdout + p.stderr
    record(
        "6b'. `tabjob export` of the half-written run URI is refused the same way",
        p.returncode != 0 and "not a finished run" in msg and "Traceback" not in msg,
        shown(p),
    )


def check_empty_prefix(tmp: Path) -> None:
    p = run([TABJOB, "predict", RUN_URI, EMPTY_URI, "--output", str(tmp / "empty.csv")])
    msg = p.stdout + p.stderr
    names_found = any(n in msg for n in EMPTY_NAMES)
    ok = p.returncode != 0 and EMPTY_URI.rstrip("/") in msg and names_found and "Traceback" not in msg
    record(
        "6c. `tabjob predict <run URI> <prefix with no data files>` is refused in one clear message naming the "
        "prefix and what it found there",
        ok,
        shown(p),
    )


# ------------------------------------------------------------------------------------------------------------ main


def main() -> int:
    for var in ("KUBECONFIG", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        if not os.environ.get(var):
            print(f"set-up: {var} is not set; run `source .cluster/env` first", file=sys.stderr)
            return 2
    if not (os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")):
        print("set-up: no AWS_ENDPOINT_URL; run `source .cluster/env` first", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="tabjob-bb-"))
    s3 = s3_client()
    created_bucket = created_ns = False
    log(f"bucket {BUCKET}, namespace {NS}, scratch {tmp}")
    try:
        # 1. bucket and data
        s3.create_bucket(Bucket=BUCKET)
        created_bucket = True
        info = upload_data(s3, tmp / "data")
        check_data_uploaded(s3, info)

        # 2. namespace, Secrets (copied from the test bed's, as docs/storage.md "On the test bed" says), jobs
        p = kubectl("create", "namespace", NS)
        if p.returncode != 0:
            record("setup: create namespace", False, shown(p))
            return 2
        created_ns = True
        kubectl("label", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted")
        src = kubectl("-n", "tabjob-s3", "get", "secret", "s3-credentials", "-o", "json")
        if src.returncode != 0:
            record("setup: read the test bed's s3-credentials Secret", False, shown(src))
            return 2
        import base64

        data = {k: base64.b64decode(v).decode() for k, v in json.loads(src.stdout)["data"].items()}
        access_key = data["AWS_ACCESS_KEY_ID"]
        wrong_secret = "wrong-" + secrets.token_hex(12)
        for name, secret_key in (("s3-credentials", data["AWS_SECRET_ACCESS_KEY"]), ("s3-wrong-key", wrong_secret)):
            args = ["-n", NS, "create", "secret", "generic", name]
            for k, v in data.items():
                args.append(f"--from-literal={k}={secret_key if k == 'AWS_SECRET_ACCESS_KEY' else v}")
            log("$ kubectl " + " ".join(a if "SECRET" not in a else a.split("=")[0] + "=<hidden>" for a in args))
            p = subprocess.run(["kubectl", *args], capture_output=True, text=True, timeout=60)
            if p.returncode != 0:
                record(f"setup: create Secret {name}", False, f"rc={p.returncode} {p.stderr}")
                return 2
        log(f"Secret keys: {sorted(data)} (endpoint {data.get('AWS_ENDPOINT_URL')})")

        manifests = [
            job_manifest("s3job", "s3-credentials", TRAIN_URI, RUN_URI, export=True),
            job_manifest("s3wrongkey", "s3-wrong-key", TRAIN_URI, f"s3://{BUCKET}/{WRONG_RUN_PREFIX}", export=False),
            job_manifest("s3emptydata", "s3-credentials", EMPTY_URI, f"s3://{BUCKET}/{EMPTY_RUN_PREFIX}", export=False),
        ]
        for m in manifests:
            path = tmp / f"{m['metadata']['name']}.yaml"
            path.write_text(yaml.safe_dump(m, sort_keys=False))
            val = run([TABJOB, "validate", str(path)])
            a = kubectl("apply", "-f", str(path))
            ok = val.returncode == 0 and a.returncode == 0
            record(
                f"2. TabularJob {m['metadata']['name']} "
                f"(envFrom Secret {m['spec']['envFrom'][0]['secretRef']['name']}"
                f", data {m['spec']['data']['train']}, output.uri {m['spec']['output']['uri']}"
                f"{', export mlserver' if 'export' in m['spec'] else ''}) validates and is applied",
                ok,
                f"manifest:\n{path.read_text()}validate: {shown(val)}\napply: {shown(a)}",
            )
            if not ok:
                return 1

        # 3. wait
        jobs = wait_all(["s3job", "s3wrongkey", "s3emptydata"], JOB_TIMEOUT_S)
        main_ok = check_main_job(s3, jobs["s3job"], info)
        if main_ok:
            check_secret_not_leaked(s3, data["AWS_SECRET_ACCESS_KEY"])
            check_predict(s3, tmp, info)
            check_kserve(s3, tmp)
        else:
            record("4/5. predict and export of the run", False, "skipped: the main job did not succeed")
        check_uncommitted(tmp)
        check_empty_prefix(tmp)
        # the negative jobs last, read again minutes after they ended, so a late retry would show
        check_wrong_key(refetch("s3wrongkey", jobs["s3wrongkey"]), access_key, wrong_secret)
        check_empty_job(refetch("s3emptydata", jobs["s3emptydata"]))
        wrong_run_keys = list_keys(s3, WRONG_RUN_PREFIX)
        record(
            "6a'. the failed job committed nothing under its output.uri",
            not any(k.endswith("_COMMITTED.json") for k in wrong_run_keys),
            f"objects under {WRONG_RUN_PREFIX}: {sorted(wrong_run_keys)}",
        )
    except Exception:
        record("the check itself ran to the end", False, traceback.format_exc())
    finally:
        log("cleaning up")
        if created_ns:
            p = kubectl("delete", "namespace", NS, "--wait=true", "--timeout=180s", timeout=240)
            log(f"namespace {NS} deleted: rc={p.returncode} {p.stderr.strip()}")
        if created_bucket:
            try:
                keys = list(list_keys(s3, ""))
                for i in range(0, len(keys), 500):
                    s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys[i : i + 500]]})
                s3.delete_bucket(Bucket=BUCKET)
                log(f"bucket {BUCKET}: {len(keys)} objects and the bucket deleted")
            except Exception as exc:
                log(f"bucket clean-up failed: {exc}")
        shutil.rmtree(tmp, ignore_errors=True)

    failed = [n for n, ok, _ in RESULTS if not ok]
    print("\n==== summary")
    for n, ok, _ in RESULTS:
        print(f"{'PASS' if ok else 'FAIL'}  {n}")
    print(f"{len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
