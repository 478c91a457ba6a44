"""`tabjob serve` is real MLServer on loopback: NVIDIA's tritonclient gets, for every test row of a real table with
missing cells, exactly what `tabjob predict` writes; bad requests get a 4xx naming the input and the server stays
ready; SIGTERM stops it."""

from __future__ import annotations

import json
import math
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.serving.penguins import DATATYPES
from tests.serving.server import HOST, Server, free_ports, outputs_frame, post, running, tabjob_serve, v2_body
from tests.trainer.helpers import tabjob

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, penguins_run: dict[str, Path]) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    args, port = tabjob_serve(penguins_run["run"], log)
    with running(args, port, log) as server:
        yield server


@pytest.fixture(scope="module")
def predicted(tmp_path_factory: pytest.TempPathFactory, penguins_run: dict[str, Path]) -> pd.DataFrame:
    """What `tabjob predict` writes for the test rows, read back from its CSV."""
    target = tmp_path_factory.mktemp("predict") / "p.csv"
    result = tabjob("predict", str(penguins_run["run"]), str(penguins_run["test"]), "--output", str(target))
    assert result.returncode == 0, result.stderr
    return pd.read_csv(target)


def _triton_inputs(frame: pd.DataFrame) -> list[Any]:
    from tritonclient.http import InferInput

    class NullableInput(InferInput):
        """tritonclient's JSON has no null: it writes NaN (not JSON) for a missing number and the text 'None' for
        a missing string. V2 JSON spells a missing cell null, so those cells are written as null here."""

        _data: list[Any]

        def set_missing(self, missing: np.ndarray) -> None:
            self._data = [None if m else v for v, m in zip(self._data, missing.ravel(), strict=True)]

    inputs = []
    for col, datatype in DATATYPES.items():
        column = frame[col]
        if datatype == "BYTES":
            values = np.array([None if pd.isna(v) else str(v) for v in column], dtype=object)
        elif datatype == "INT64":
            values = column.to_numpy(dtype=np.int64)
        else:
            values = column.to_numpy(dtype=np.float64)
        tensor = NullableInput(col, [len(frame), 1], datatype)
        tensor.set_data_from_numpy(values.reshape(-1, 1), binary_data=False)  # MLServer has no binary extension
        tensor.set_missing(column.isna().to_numpy())
        inputs.append(tensor)
    return inputs


def _triton_frame(server: Server, frame: pd.DataFrame, model: str = "penguins") -> pd.DataFrame:
    import tritonclient.http as triton

    client = triton.InferenceServerClient(url=server.url.removeprefix("http://"))
    names = ["prediction", "proba_Adelie", "proba_Chinstrap", "proba_Gentoo"]
    outputs = [triton.InferRequestedOutput(n, binary_data=False) for n in names]
    result = client.infer(model, _triton_inputs(frame), outputs=outputs)
    got = {}
    for name in names:
        values = result.as_numpy(name).ravel()
        got[name] = [v.decode() if isinstance(v, bytes) else v for v in values]
    return pd.DataFrame(got)


def test_tritonclient_gets_exactly_what_tabjob_predict_writes(
    served: Server, penguins_run: dict[str, Path], predicted: pd.DataFrame
) -> None:
    rows = pd.read_csv(penguins_run["test"])
    assert rows.isna().any(axis=1).sum() >= 10  # missing cells in numbers and strings are part of the test
    assert rows["year"].dtype == np.int64
    batch = _triton_frame(served, rows)
    pd.testing.assert_frame_equal(batch, predicted, check_exact=True, check_dtype=False)
    # One row per request too, the rows with missing cells among them.
    for i in rows.index[rows.isna().any(axis=1)][:8]:
        single = _triton_frame(served, rows.loc[[i]])
        pd.testing.assert_frame_equal(
            single, predicted.loc[[i]].reset_index(drop=True), check_exact=True, check_dtype=False
        )


def test_metadata_advertises_every_feature_column(served: Server) -> None:
    import tritonclient.http as triton

    client = triton.InferenceServerClient(url=served.url.removeprefix("http://"))
    assert client.is_model_ready("penguins")
    meta = client.get_model_metadata("penguins")
    assert {i["name"]: i["datatype"] for i in meta["inputs"]} == DATATYPES
    assert [o["name"] for o in meta["outputs"]] == ["prediction", "proba_Adelie", "proba_Chinstrap", "proba_Gentoo"]


def _good(rows: pd.DataFrame) -> dict[str, Any]:
    return v2_body(rows, DATATYPES)


def _with(body: dict[str, Any], name: str, **change: Any) -> dict[str, Any]:
    inputs = [dict(i, **change) if i["name"] == name else i for i in body["inputs"]]
    return {"inputs": inputs}


def test_bad_requests_get_a_4xx_naming_the_input_and_the_server_stays_ready(
    served: Server, penguins_run: dict[str, Path], predicted: pd.DataFrame
) -> None:
    rows = pd.read_csv(penguins_run["test"]).iloc[:3]
    good = _good(rows)
    url = f"{served.url}/v2/models/penguins/infer"
    cases: list[tuple[str, bytes | dict[str, Any], int, str]] = [
        (
            "missing column",
            {"inputs": [i for i in good["inputs"] if i["name"] != "sex"]},
            400,
            "input 'sex' is missing",
        ),
        (
            "text in a numeric column",
            _with(good, "body_mass_g", data=["heavy", 3000.0, None]),
            400,
            "input 'body_mass_g' (FP64): 'heavy' is not a number",
        ),
        (
            "wrong datatype",
            _with(good, "island", datatype="FP64", data=[1.0, 2.0, 3.0]),
            400,
            "input 'island': datatype FP64 where the model takes BYTES",
        ),
        ("datatype V2 does not know", _with(good, "year", datatype="TEXT"), 422, "datatype"),
        (
            "unequal lengths",
            _with(good, "year", shape=[2, 1], data=[2007, 2008]),
            400,
            "inputs have different lengths: 'bill_length_mm' has 3 rows, 'year' has 2",
        ),
        (
            "shape that does not match the data",
            _with(good, "year", shape=[4, 1]),
            400,
            "input 'year': shape [4, 1] says 4 rows but data holds 3 values",
        ),
        ("a body that is not JSON", b"bill_length_mm=39.1", 422, "JSON decode error"),
        ("no inputs", {"inputs": []}, 400, "input 'bill_length_mm' is missing"),
        (
            "an infinite number",
            json.dumps(_with(good, "bill_depth_mm", data=["INF", 18.0, 17.0])).replace('"INF"', "1e999").encode(),
            422,  # MLServer's JSON parser refuses it before the model sees it
            "number is infinity",
        ),
    ]
    for what, body, status, message in cases:
        got, answer = post(url, body)
        text = json.dumps(answer)
        assert got == status, f"{what}: {got} {text}"
        assert message in (answer.get("error") or text), f"{what}: {text}"
        assert served.ready(), f"not ready after {what}"
    # Still serving, and an extra input is ignored as AutoGluon does.
    extra = {"inputs": [*good["inputs"], {"name": "comment", "datatype": "BYTES", "shape": [3], "data": ["a"] * 3}]}
    status, answer = post(url, extra)
    assert status == 200, answer
    pd.testing.assert_frame_equal(outputs_frame(answer), predicted.iloc[:3], check_exact=True, check_dtype=False)


def test_an_empty_batch_gets_an_empty_answer(served: Server, penguins_run: dict[str, Path]) -> None:
    empty = _good(pd.read_csv(penguins_run["test"]).iloc[:0])
    status, answer = post(f"{served.url}/v2/models/penguins/infer", empty)
    assert status == 200, answer
    assert [(o["name"], o["shape"], o["data"]) for o in answer["outputs"]] == [
        ("prediction", [0, 1], []),
        ("proba_Adelie", [0, 1], []),
        ("proba_Chinstrap", [0, 1], []),
        ("proba_Gentoo", [0, 1], []),
    ]


def test_null_is_a_missing_value_as_an_empty_csv_cell_is(served: Server, predicted: pd.DataFrame) -> None:
    row = pd.DataFrame([{c: None for c in DATATYPES}])
    status, answer = post(f"{served.url}/v2/models/penguins/infer", _good(row))
    assert status == 200, answer
    probabilities = [o["data"][0] for o in answer["outputs"][1:]]
    assert math.isclose(sum(probabilities), 1.0) and answer["outputs"][0]["data"][0] in {
        "Adelie",
        "Chinstrap",
        "Gentoo",
    }


def test_sigterm_stops_tabjob_serve_and_cleans_up(tmp_path: Path, penguins_run: dict[str, Path]) -> None:
    log = tmp_path / "serve.log"
    args, port = tabjob_serve(penguins_run["run"], log, "--name", "birds", "--model", "NN_TORCH")
    with running(args, port, log) as server:
        status, answer = post(f"{server.url}/v2/models/birds/infer", _good(pd.read_csv(penguins_run["test"]).iloc[:2]))
        assert status == 200 and answer["model_name"] == "birds", answer
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=60) == 0, log.read_text()[-2000:]
    assert "serving birds (NN_TORCH)" in log.read_text()


def test_serve_refuses_bad_flags_before_starting(penguins_run: dict[str, Path]) -> None:
    same = tabjob("serve", str(penguins_run["run"]), "--port", "9000", "--grpc-port", "9000")
    assert same.returncode == 1 and "must differ" in same.stderr
    unknown = tabjob("serve", str(penguins_run["run"]), "--model", "XGB")
    assert unknown.returncode == 1 and "no model 'XGB'" in unknown.stderr
    high = tabjob("serve", str(penguins_run["run"]), "--port", "65535")
    assert high.returncode == 1 and "--grpc-port 65536" in high.stderr


def test_mlserver_start_serves_an_export(
    tmp_path: Path, penguins_run: dict[str, Path], predicted: pd.DataFrame
) -> None:
    target = tmp_path / "repo"
    exported = tabjob("export", str(penguins_run["run"]), "--format", "mlserver", "--output", str(target))
    assert exported.returncode == 0, exported.stderr
    http, grpc, metrics = free_ports(3)
    ports = {"MLSERVER_HTTP_PORT": http, "MLSERVER_GRPC_PORT": grpc, "MLSERVER_METRICS_PORT": metrics}
    env = {"MLSERVER_HOST": HOST, **{k: str(v) for k, v in ports.items()}}
    mlserver = str(Path(sys.executable).parent / "mlserver")
    with running([mlserver, "start", str(target)], http, tmp_path / "mlserver.log", env) as server:
        status, answer = post(f"{server.url}/v2/models/penguins/infer", _good(pd.read_csv(penguins_run["test"])))
    assert status == 200, answer
    pd.testing.assert_frame_equal(outputs_frame(answer), predicted, check_exact=True, check_dtype=False)
