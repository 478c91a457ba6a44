"""The served half of bench/serving.py: `tabjob serve` and a ``mlserver-lightgbm`` peer over HTTP JSON on loopback.

The client keeps one HTTP connection and sends bodies encoded beforehand, so the figures are the server's round
trip (JSON parsing, decoding, preprocessing, the models, encoding the answer) plus reading the answer. The peer is
MLServer's own LightGBM runtime on the run's best single booster (the GBM fold with the best validation score):
what a user could serve without tabjob. It takes one FP64 matrix, so the client encodes strings to the booster's
category codes itself (tabjob's preprocessing, run before timing) and a missing cell is null.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tabjob_trainer import store
from tabjob_trainer.models.gbm import to_matrix
from tabjob_trainer.predictor import Predictor
from tests.serving.server import HOST, free_ports, running, tabjob_serve, v2_body

WORK = Path("/tmp/tabjob-bench/serving")
NAME = "penguins"
ROUNDS = 5
ROW_REQUESTS = 200


class Client:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=120)

    def infer(self, model: str, body: bytes) -> dict[str, Any]:
        self.conn.request("POST", f"/v2/models/{model}/infer", body, {"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        answer: dict[str, Any] = json.loads(resp.read())
        if resp.status != 200:
            raise RuntimeError(f"{resp.status}: {answer}")
        return answer


def _datatypes(predictor: Predictor) -> dict[str, str]:
    from tabjob_trainer.serving.schema import input_metadata

    return {t.name: t.datatype for t in input_metadata(predictor.pre)}


def _peer_body(matrix: np.ndarray) -> bytes:
    data = [None if np.isnan(v) else float(v) for v in matrix.ravel()]
    return json.dumps(
        {"inputs": [{"name": "x", "datatype": "FP64", "shape": list(matrix.shape), "data": data}]}
    ).encode()


def _latencies(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def _p(values: list[float], q: float) -> float:
    return float(np.quantile(values, q))


def _best_booster(run: Path, predictor: Predictor) -> str:
    gbm = [m for m in predictor.files.index if predictor.files.index[m]["key"] == "GBM"]
    fits = [fid for m in gbm for fid in predictor.files.index[m]["fits"]]
    records = {fid: json.loads((store.fit_dir(run, fid) / "result.json").read_text()) for fid in fits}
    return max(fits, key=lambda fid: records[fid]["scoreVal"])


def served(run: Path, test: pd.DataFrame, batch: pd.DataFrame, label: str) -> dict[str, Any]:
    predictor = Predictor.load(run)
    types = _datatypes(predictor)
    rows = test.drop(columns=[label])
    tab_batch = json.dumps(v2_body(batch, types)).encode()
    tab_row = json.dumps(v2_body(batch.iloc[:1], types)).encode()
    tab_test = json.dumps(v2_body(rows, types)).encode()

    booster_id = _best_booster(run, predictor)
    peer_dir = WORK / "peer"
    (peer_dir / "booster").mkdir(parents=True, exist_ok=True)
    (peer_dir / "booster" / "model.bst").write_text((store.fit_dir(run, booster_id) / "model.txt").read_text())
    settings = {
        "name": "booster",
        "implementation": "mlserver_lightgbm.LightGBMModel",
        "parameters": {"uri": "./model.bst"},
    }
    (peer_dir / "booster" / "model-settings.json").write_text(json.dumps(settings))
    (peer_dir / "settings.json").write_text(json.dumps({"parallel_workers": 0}))
    encode = predictor.pre.transform
    peer_batch = _peer_body(to_matrix(encode(batch, "bench")))
    peer_row = _peer_body(to_matrix(encode(batch.iloc[:1], "bench")))
    peer_test = _peer_body(to_matrix(encode(rows, "bench")))

    log_dir = WORK
    args, port = tabjob_serve(run, log_dir / "tabjob-serve.log", "--name", NAME)
    http_port, grpc, metrics = free_ports(3)
    env = {"MLSERVER_HOST": HOST, "MLSERVER_HTTP_PORT": str(http_port), "MLSERVER_GRPC_PORT": str(grpc)}
    env["MLSERVER_METRICS_PORT"] = str(metrics)
    mlserver = str(Path(sys.executable).parent / "mlserver")
    times: dict[str, list[float]] = {k: [] for k in ("in_process", "tabjob", "peer")}
    rows_lat: dict[str, list[float]] = {k: [] for k in ("in_process", "tabjob", "peer")}
    name, one = NAME, batch.iloc[:1]
    with (
        running(args, port, log_dir / "tabjob-serve.log") as _tab,
        running([mlserver, "start", str(peer_dir)], http_port, log_dir / "peer.log", env),
    ):
        tab, peer = Client(port), Client(http_port)
        tab_answer = tab.infer(name, tab_test)
        peer_answer = peer.infer("booster", peer_test)
        for _ in range(ROUNDS):  # alternate, so all three see the same machine load
            times["in_process"] += _latencies(lambda: predictor.predict_frame(batch, "bench"), 3)
            times["tabjob"] += _latencies(lambda: tab.infer(name, tab_batch), 3)
            times["peer"] += _latencies(lambda: peer.infer("booster", peer_batch), 3)
            rows_lat["in_process"] += _latencies(lambda: predictor.predict_frame(one, "bench"), ROW_REQUESTS // ROUNDS)
            rows_lat["tabjob"] += _latencies(lambda: tab.infer(name, tab_row), ROW_REQUESTS // ROUNDS)
            rows_lat["peer"] += _latencies(lambda: peer.infer("booster", peer_row), ROW_REQUESTS // ROUNDS)

    truth = test[label].astype(str).tolist()
    tab_pred = [str(v) for v in tab_answer["outputs"][0]["data"]]
    proba = np.asarray(peer_answer["outputs"][0]["data"], dtype=np.float64).reshape(len(rows), -1)
    classes = [str(c) for c in predictor.label.classes]
    peer_pred = [classes[i] for i in proba.argmax(axis=1)]
    n = len(batch)
    in_rate = n / min(times["in_process"])  # best of the repeats, as for the servers below
    out: dict[str, Any] = {
        "mlserver": version("mlserver"),
        "mlserver_lightgbm": version("mlserver-lightgbm"),
        "model": predictor.model,
        "metric": "accuracy",
        "row_requests": ROW_REQUESTS,
        "tabjob_score": float(np.mean([p == t for p, t in zip(tab_pred, truth, strict=True)])),
        "peer_score": float(np.mean([p == t for p, t in zip(peer_pred, truth, strict=True)])),
        "in_process_rows_per_s": in_rate,
        "in_process_row_p50_s": _p(rows_lat["in_process"], 0.5),
    }
    for key, booster in (("tabjob", None), ("peer", booster_id)):
        rate = n / min(times[key])
        out[key] = {
            "rows_per_s": rate,
            "ratio": rate / in_rate,
            "row_p50_s": _p(rows_lat[key], 0.5),
            "row_p90_s": _p(rows_lat[key], 0.9),
            **({"booster": booster} if booster else {}),
        }
    return out
