"""`tabjob export --format kserve`: manifests kubectl can apply, whose storageUri is where the job wrote its export.

Checked against KServe's own CRDs (serving.kserve.io ServingRuntime v1alpha1 and InferenceService v1beta1: types,
required fields, no unknown fields) when this was written; here the structure the two objects must share.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tabjob.cli import main
from tabjob_trainer.preprocess import Preprocessor
from tabjob_trainer.problem import LabelInfo

PVC_JOB = """\
apiVersion: tabjob.dev/v1alpha1
kind: TabularJob
metadata: {name: adult, namespace: ml}
spec:
  data: {train: /data/train.csv, label: y, volume: {persistentVolumeClaim: {claimName: datasets}}}
  output: {path: /output/runs/adult, volume: {persistentVolumeClaim: {claimName: tabjob-output}}}
  resources: {cpus: 2}
  models: {GBM: [{}]}
"""


def _run(tmp: Path, job: str | None = PVC_JOB) -> Path:
    """A finished run's result files (no fits are needed to write manifests)."""
    run = tmp / "run"
    run.mkdir()
    pre = Preprocessor(numeric=["a"], kinds={"a": "float"})
    label = LabelInfo(problem_type="regression", classes=[])
    (run / "preprocessing.json").write_text(json.dumps({"features": pre.to_dict(), "label": label.to_dict()}))
    (run / "models.json").write_text(json.dumps({"GBM": {"key": "GBM", "fits": ["GBM.t0"]}}))
    (run / "leaderboard.json").write_text(json.dumps([{"model": "GBM", "score_val": -1.0}]))
    if job is not None:
        (run / "spec.json").write_text(json.dumps(yaml.safe_load(job)))
    return run


def _export(run: Path, out: Path, *args: str) -> dict[str, Any]:
    assert main(["export", str(run), "--format", "kserve", "--output", str(out), *args]) == 0
    docs = {p.name: yaml.safe_load(p.read_text()) for p in sorted(out.iterdir())}
    monitor = {"podmonitor.yaml"} if "--pod-monitor" in args else set()
    assert set(docs) == {"servingruntime.yaml", "inferenceservice.yaml", *monitor}
    return docs


def test_a_pvc_output_becomes_the_storage_uri_of_the_jobs_export(tmp_path: Path) -> None:
    docs = _export(_run(tmp_path), tmp_path / "k")
    runtime, isvc = docs["servingruntime.yaml"], docs["inferenceservice.yaml"]
    assert (runtime["apiVersion"], runtime["kind"]) == ("serving.kserve.io/v1alpha1", "ServingRuntime")
    assert (isvc["apiVersion"], isvc["kind"]) == ("serving.kserve.io/v1beta1", "InferenceService")
    assert isvc["metadata"] == {
        "name": "adult",
        "namespace": "ml",
        "labels": {"app.kubernetes.io/managed-by": "tabjob"},
    }
    model = isvc["spec"]["predictor"]["model"]
    assert model["storageUri"] == "pvc://tabjob-output/runs/adult/mlserver"  # where spec.export writes it
    # The InferenceService picks this runtime: same name, a format it supports, the V2 protocol on both sides.
    assert model["runtime"] == runtime["metadata"]["name"] and runtime["metadata"]["namespace"] == "ml"
    assert {"name": model["modelFormat"]["name"], "version": "1", "autoSelect": True} in runtime["spec"][
        "supportedModelFormats"
    ]
    assert model["protocolVersion"] == "v2" and runtime["spec"]["protocolVersions"] == ["v2"]
    (container,) = runtime["spec"]["containers"]
    assert container["name"] == "kserve-container" and container["image"].startswith("ghcr.io/tabjob/tabjob-trainer:")
    assert [*container["command"], *container["args"]] == ["mlserver", "start", "/mnt/models"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["MLSERVER_PARALLEL_WORKERS"] == "0" and env["MLSERVER_HTTP_PORT"] == "8080"
    # One port: Knative (KServe's default Serverless mode) refuses a container with more.
    assert container["ports"] == [{"containerPort": 8080, "name": "http", "protocol": "TCP"}]
    assert isvc["spec"]["predictor"]["labels"] == {"tabjob.dev/model": "adult"}
    assert "annotations" not in isvc["metadata"]  # KServe's default deployment mode
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": 8080}
    assert runtime["spec"]["annotations"]["prometheus.kserve.io/port"] == env["MLSERVER_METRICS_PORT"]
    assert all(isinstance(e["value"], str) for e in container["env"])  # env values must be strings


def test_a_pod_monitor_scrapes_the_metrics_port_of_the_predictor_pods(tmp_path: Path) -> None:
    docs = _export(_run(tmp_path), tmp_path / "k", "--pod-monitor")
    runtime, isvc, monitor = docs["servingruntime.yaml"], docs["inferenceservice.yaml"], docs["podmonitor.yaml"]
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
    assert monitor["metadata"]["name"] == "adult" and monitor["metadata"]["namespace"] == "ml"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["ml"]}
    # It selects the pods KServe labels from the InferenceService's predictor, and nothing else.
    assert monitor["spec"]["selector"] == {"matchLabels": {"tabjob.dev/model": "adult"}}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= isvc["spec"]["predictor"]["labels"].items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    # The port it names is MLServer's metrics port, on the container of the runtime the InferenceService picks.
    (container,) = runtime["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert container["ports"][0]["name"] == "http"  # the Service KServe makes targets the first port
    assert endpoint["port"] == "metrics" and str(ports["metrics"]) == env["MLSERVER_METRICS_PORT"]
    assert endpoint["path"] == runtime["spec"]["annotations"]["prometheus.kserve.io/path"] == "/metrics"
    # Two ports are Knative's refusal, so this runtime stands apart and serves RawDeployment models only.
    assert isvc["metadata"]["annotations"] == {"serving.kserve.io/deploymentMode": "RawDeployment"}
    assert isvc["spec"]["predictor"]["model"]["runtime"] == runtime["metadata"]["name"] == "tabjob-mlserver-raw"
    assert runtime["spec"]["supportedModelFormats"] == [{"name": "tabjob", "version": "1", "autoSelect": False}]


def test_an_export_without_the_flag_drops_an_earlier_pod_monitor(tmp_path: Path) -> None:
    run = _run(tmp_path)
    _export(run, tmp_path / "k", "--pod-monitor")
    docs = _export(run, tmp_path / "k")  # asserts the two manifests alone
    assert docs["inferenceservice.yaml"]["spec"]["predictor"]["model"]["runtime"] == "tabjob-mlserver"


def test_a_pod_monitor_without_a_namespace_watches_its_own(tmp_path: Path) -> None:
    docs = _export(
        _run(tmp_path, job=None), tmp_path / "k", "--storage-uri", "s3://b/m", "--name", "m", "--pod-monitor"
    )
    monitor = docs["podmonitor.yaml"]
    assert "namespace" not in monitor["metadata"] and "namespaceSelector" not in monitor["spec"]


def test_a_pod_monitor_is_refused_for_an_mlserver_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(_run(tmp_path)), "-f", "mlserver", "-o", str(tmp_path / "m"), "--pod-monitor"]) == 1
    assert "--pod-monitor: only with --format kserve" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("uri", ["s3://models/adult/mlserver", "gs://bucket/adult", "pvc://other/claim/path"])
def test_a_storage_uri_given_passes_through(tmp_path: Path, uri: str) -> None:
    isvc = _export(_run(tmp_path, job=None), tmp_path / "k", "--storage-uri", uri, "--name", "adult")
    assert isvc["inferenceservice.yaml"]["spec"]["predictor"]["model"]["storageUri"] == uri
    assert "namespace" not in isvc["inferenceservice.yaml"]["metadata"]


def test_image_namespace_and_the_name_of_an_existing_export(tmp_path: Path) -> None:
    run = _run(tmp_path)
    (run / "mlserver").mkdir()
    (run / "mlserver" / "model-settings.json").write_text(json.dumps({"name": "adult-income"}))
    docs = _export(run, tmp_path / "k", "--image", "registry.local/trainer:1", "--namespace", "serving")
    assert docs["inferenceservice.yaml"]["metadata"]["name"] == "adult-income"
    assert docs["servingruntime.yaml"]["metadata"]["namespace"] == "serving"
    assert docs["servingruntime.yaml"]["spec"]["containers"][0]["image"] == "registry.local/trainer:1"


@pytest.mark.parametrize(
    ("job", "args", "message"),
    [
        (
            PVC_JOB.replace("{persistentVolumeClaim: {claimName: tabjob-output}}", "{emptyDir: {}}"),
            [],
            "spec.output.volume: emptyDir",
        ),
        (
            PVC_JOB.replace(", volume: {persistentVolumeClaim: {claimName: tabjob-output}}", ""),
            [],
            "emptyDir (the default)",
        ),
        (None, [], "no TabularJob manifest"),
        (PVC_JOB, ["--storage-uri", "ftp://x/y"], "--storage-uri 'ftp://x/y': use one of pvc://"),
        (PVC_JOB, ["--name", "Adult_Income"], "--name 'Adult_Income': an InferenceService name is a DNS label"),
    ],
)
def test_what_cannot_be_served_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str | None, args: list[str], message: str
) -> None:
    assert main(["export", str(_run(tmp_path, job)), "-f", "kserve", "-o", str(tmp_path / "k"), *args]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "k").exists()


def test_the_serving_example_points_kserve_at_its_export(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "serving.yaml"
    docs = _export(_run(tmp_path, job=None), tmp_path / "k", "--job", str(example))
    isvc = docs["inferenceservice.yaml"]
    assert isvc["metadata"]["name"] == "penguins"
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == "pvc://tabjob-output/penguins/mlserver"
