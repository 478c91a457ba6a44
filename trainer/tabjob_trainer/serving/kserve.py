"""``tabjob export --format kserve``: a ServingRuntime and an InferenceService that serve a run's MLServer export.

The ServingRuntime runs the trainer image (it holds MLServer and the tabjob runtime) as ``mlserver start
/mnt/models``, where KServe's storage initializer puts the model: a PVC is mounted there read-only, s3:// and gs://
are downloaded. The InferenceService is named after the model, since V2 requests name it in
``/v2/models/NAME/infer``, and its ``storageUri`` comes from where the job wrote its export (``spec.export``): the
output PVC's claim and the output path inside it, ``pvc://CLAIM/PATH/mlserver``. ``--storage-uri`` names another
place (an export copied to a bucket: s3://, gs://, https://, pvc://).

``--pod-monitor`` adds a prometheus-operator PodMonitor (serving/monitor.py) and names MLServer's metrics port
``metrics`` as it expects. Knative allows one port per container, so that runtime is a separate one
(``tabjob-mlserver-raw``, never auto-selected) and the InferenceService asks for KServe's RawDeployment mode.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

from tabjob.api import TabularJob, parse_manifest
from tabjob.api.parse import load_documents
from tabjob.contracts import pod
from tabjob_trainer.errors import DataError
from tabjob_trainer.serving.export import EXPORT_DIR
from tabjob_trainer.serving.monitor import MANAGED_BY, METRICS_PATH, metrics_port, model_labels, pod_monitor

OUTPUT_MOUNT = pod.OUTPUT_DIR  # where the trainer pods mount spec.output.volume
MODEL_DIR = "/mnt/models"  # where KServe's storage initializer puts the model
MODEL_FORMAT = "tabjob"
RUNTIME_NAME = "tabjob-mlserver"
RAW_RUNTIME_NAME = "tabjob-mlserver-raw"  # names its metrics port: RawDeployment only
DEPLOYMENT_MODE = "serving.kserve.io/deploymentMode"
DEFAULT_IMAGE = pod.TRAINER_IMAGE  # the trainer image carries MLServer and the tabjob runtime
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8080, 9000, 8082  # KServe's own MLServer runtime uses 8080 and 9000
STORAGE_SCHEMES = ("pvc://", "s3://", "gs://", "https://", "http://", "hdfs://", "webhdfs://")
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def job_of(run_dir: Path, job_file: str | None) -> TabularJob:
    """The TabularJob that wrote the run: ``--job FILE``, else the ``spec.json`` `tabjob run` keeps in the run."""
    path = Path(job_file) if job_file else run_dir / "spec.json"
    if not path.exists():
        hint = "" if job_file else " (`tabjob run` writes it; for a cluster job pass --job MANIFEST or --storage-uri)"
        raise DataError(f"{path}: no TabularJob manifest{hint}")
    try:
        # kubectl's YAML (a superset of JSON): PyYAML's own resolver reads spec.json's 1e-06 as a string.
        docs = load_documents(path)
        doc = docs[0] if docs else None
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read the manifest ({exc})") from None
    try:
        return parse_manifest(doc)
    except Exception as exc:
        raise DataError(f"{path}: not a valid TabularJob ({str(exc).splitlines()[0]})") from None


def storage_uri(job: TabularJob, run: Path | None = None) -> str:
    """Where the job's export lives, as a KServe storageUri: its object storage (spec.output.uri), or a PVC output,
    which outlives the job's pods; an emptyDir does not."""
    if job.spec.output.uri:
        if run is not None and not (run / EXPORT_DIR).is_dir():
            raise DataError(
                f"{job.spec.output.uri}: the run has no MLServer export; set spec.export: {{format: mlserver}} on the "
                "job, or write one with `tabjob export RUN --format mlserver` and pass --storage-uri"
            )
        return job.spec.output.uri.rstrip("/") + "/" + EXPORT_DIR
    volume = job.spec.output.volume
    claim = volume.persistent_volume_claim if volume is not None else None
    if claim is None:
        kind = volume.kind() if volume is not None else "emptyDir (the default)"
        raise DataError(
            f"spec.output.volume: {kind} does not outlive the job, so KServe cannot read the export from it; "
            "use a persistentVolumeClaim output, or copy the export elsewhere and pass --storage-uri (s3://, gs://)"
        )
    inside = PurePosixPath(job.spec.output.path).relative_to(OUTPUT_MOUNT)
    return "pvc://" + str(PurePosixPath(claim.claim_name) / inside / EXPORT_DIR)


def check_storage_uri(uri: str) -> str:
    if not uri.startswith(STORAGE_SCHEMES) or len(uri) <= uri.index("://") + 3:
        raise DataError(f"--storage-uri {uri!r}: use one of {', '.join(s + '...' for s in STORAGE_SCHEMES)}")
    return uri


def serving_runtime(image: str, namespace: str | None, monitored: bool = False) -> dict[str, Any]:
    """``monitored``: the metrics port is a named container port, which only a RawDeployment pod may have."""
    env = {
        "MLSERVER_HTTP_PORT": HTTP_PORT,
        "MLSERVER_GRPC_PORT": GRPC_PORT,
        "MLSERVER_METRICS_PORT": METRICS_PORT,
        # MLServer 1.7.1's parallel inference pool crashes at start; the tabjob runtime predicts in threads.
        "MLSERVER_PARALLEL_WORKERS": 0,
        "HOME": "/tmp",  # the image is read-only; torch and matplotlib keep caches under HOME
    }
    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": _metadata(RAW_RUNTIME_NAME if monitored else RUNTIME_NAME, namespace),
        "spec": {
            "annotations": {"prometheus.kserve.io/port": str(METRICS_PORT), "prometheus.kserve.io/path": METRICS_PATH},
            # Never picked for an InferenceService that names no runtime: it may be a Serverless one.
            "supportedModelFormats": [{"name": MODEL_FORMAT, "version": "1", "autoSelect": not monitored}],
            "protocolVersions": ["v2"],
            "containers": [
                {
                    "name": "kserve-container",
                    "image": image,
                    # The trainer image's entry point is torchrun; serving runs MLServer instead.
                    "command": ["mlserver"],
                    "args": ["start", MODEL_DIR],
                    "env": [{"name": k, "value": str(v)} for k, v in env.items()],
                    # http first: KServe's RawDeployment Service targets the first port.
                    "ports": [
                        {"containerPort": HTTP_PORT, "name": "http", "protocol": "TCP"},
                        *([metrics_port(METRICS_PORT)] if monitored else []),
                    ],
                    "readinessProbe": {
                        "httpGet": {"path": "/v2/health/ready", "port": HTTP_PORT},
                        "periodSeconds": 5,
                        "failureThreshold": 3,
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "privileged": False,
                        "runAsNonRoot": True,
                        "runAsUser": 1000,
                        "capabilities": {"drop": ["ALL"]},
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "resources": {
                        "requests": {"cpu": "1", "memory": "2Gi"},
                        "limits": {"cpu": "1", "memory": "2Gi"},
                    },
                }
            ],
        },
    }


def storage_service_account(name: str, secret: str, namespace: str | None) -> dict[str, Any]:
    """KServe's S3 credential convention: a ServiceAccount listing the Secret that holds AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY; KServe hands them (and the Secret's serving.kserve.io/s3-* annotations: endpoint, region,
    https) to its storage initializer, which downloads the model."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(name, namespace),
        "secrets": [{"name": secret}],
    }


def inference_service(
    name: str, uri: str, namespace: str | None, monitored: bool = False, service_account: str | None = None
) -> dict[str, Any]:
    metadata = _metadata(name, namespace)
    if monitored:
        metadata["annotations"] = {DEPLOYMENT_MODE: "RawDeployment"}
    predictor: dict[str, Any] = {
        # On the predictor's pods, where a PodMonitor selects them.
        "labels": model_labels(name),
        "model": {
            "modelFormat": {"name": MODEL_FORMAT, "version": "1"},
            "runtime": RAW_RUNTIME_NAME if monitored else RUNTIME_NAME,
            "protocolVersion": "v2",
            "storageUri": uri,
        },
    }
    if service_account:
        predictor["serviceAccountName"] = service_account
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": metadata,
            "spec": {"predictor": predictor}}  # fmt: skip


def _metadata(name: str, namespace: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(MANAGED_BY)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def write_kserve(
    run_dir: str | Path,
    output: str | Path,
    name: str | None = None,
    job_file: str | None = None,
    uri: str | None = None,
    image: str | None = None,
    namespace: str | None = None,
    monitor: bool = False,
    service_account: str | None = None,
    s3_secret: str | None = None,
) -> list[Path]:
    """Write servingruntime.yaml and inferenceservice.yaml (and podmonitor.yaml with ``monitor``) to ``output``;
    returns their paths."""
    from tabjob.api.manifest_yaml import dump_yaml
    from tabjob_trainer.predictor import RunFiles
    from tabjob_trainer.serving.export import MODEL_SETTINGS

    run, target = Path(run_dir), Path(output)
    RunFiles.read(run)  # a finished run, or a clear error
    job = job_of(run, job_file) if job_file or (run / "spec.json").exists() else None
    if uri is None and job is None:
        job_of(run, job_file)  # raises, saying what is missing
    model = name or _exported_name(run / EXPORT_DIR / MODEL_SETTINGS) or (job.metadata.name if job else run.name)
    if not _DNS_LABEL.match(model):
        raise DataError(
            f"--name {model!r}: an InferenceService name is a DNS label (lower-case letters, digits and '-', "
            "starting with a letter, at most 63 characters); V2 requests name the model the same way"
        )
    location = check_storage_uri(uri) if uri else storage_uri(job, run)  # type: ignore[arg-type]
    if target.exists() and not target.is_dir():
        raise DataError(f"--output {target}: is a file; name a directory for the manifests")
    target.mkdir(parents=True, exist_ok=True)
    namespace = namespace or (job.metadata.namespace if job is not None else None)
    written = []
    if service_account is None and job is not None:
        service_account = job.spec.service_account_name  # the identity the job read and wrote the bucket as
    docs = [("servingruntime.yaml", serving_runtime(image or DEFAULT_IMAGE, namespace, monitor))]
    if s3_secret:
        service_account = f"{model}-storage"
        docs.append(("serviceaccount.yaml", storage_service_account(service_account, s3_secret, namespace)))
    else:  # `kubectl apply -f DIR` must not pick up the ServiceAccount of an earlier export there
        (target / "serviceaccount.yaml").unlink(missing_ok=True)
    docs.append(("inferenceservice.yaml", inference_service(model, location, namespace, monitor, service_account)))
    if monitor:
        docs.append(("podmonitor.yaml", pod_monitor(model, namespace)))
    else:  # `kubectl apply -f DIR` must not pick up the monitor of an earlier export there
        (target / "podmonitor.yaml").unlink(missing_ok=True)
    for filename, doc in docs:
        path = target / filename
        path.write_text(dump_yaml(doc))
        written.append(path)
    return written


def _exported_name(settings: Path) -> str | None:
    """The model name of an export the job already wrote (spec.export), so the InferenceService matches it."""
    try:
        name = json.loads(settings.read_text()).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None
