"""Pure builders for a TabularPrediction: its scoring pods, one per index, as plain dicts (`tabjob render` prints them).

Each pod runs `python -m tabjob_trainer.scoring` with the prediction's spec as arguments (no ConfigMap: the pods
need nothing else, and the plan of shards is made by pod 0 from the data, which only the pods can read). A pod's
name is `<name>-<index>` and, for its replacements, `<name>-<index>-r<n>`, so creating one twice is an
AlreadyExists. With `scheduling.queueName` the pods carry Kueue's plain-pod group labels, as a TabularJob's do, and
are admitted as one group; a replacement joins the same group (a scoring pod may be replaced alone).
"""

from __future__ import annotations

from typing import Any

from tabjob.api import API_VERSION, LABEL_ATTEMPT, LABEL_JOB
from tabjob.api.prediction import LABEL_INDEX, LABEL_PREDICTION, PREDICTION_KIND, TabularPrediction
from tabjob.contracts import pod as contract
from tabjob.controller.config import Settings
from tabjob.controller.policy.builders import JobRef

CONTAINER = "scorer"
RUN_CACHE = f"{contract.SCRATCH_DIR}/tabjob-runs"  # the run's local copy (the root filesystem is read-only)


def scoring_pod_name(name: str, index: int, created: int) -> str:
    """The pod of `index` whose `created`-th incarnation this is (1: the first)."""
    return f"{name}-{index}" if created <= 1 else f"{name}-{index}-r{created - 1}"


def owner_reference(ref: JobRef) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": PREDICTION_KIND,
        "name": ref.name,
        "uid": ref.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def scoring_args(tp: TabularPrediction, model_uri: str, index: int, owner: str, settings: Settings) -> list[str]:
    spec = tp.spec
    args = ["--model", model_uri, "--data", spec.data, "--output", spec.output.uri]
    for column in spec.passthrough_columns:
        args += ["--passthrough", column]
    args += ["--parallelism", str(spec.parallelism), "--index", str(index), "--owner", owner]
    args += ["--progress-port", str(settings.progress_port)]
    if spec.output.overwrite:
        args.append("--overwrite")
    if spec.model.name:
        args += ["--model-name", spec.model.name]
    return args


def _env(tp: TabularPrediction) -> list[dict[str, Any]]:
    threads = str(tp.spec.resources.cpus)
    own: list[dict[str, Any]] = [
        {"name": contract.UNBUFFERED.name, "value": "1"},
        {"name": contract.OMP_THREADS.name, "value": threads},
        {"name": contract.MKL_THREADS.name, "value": threads},
        {"name": contract.OPENBLAS_THREADS.name, "value": threads},
        {"name": contract.TERMINATION.name, "value": contract.TERMINATION_LOG},
        {"name": contract.RUN_CACHE.name, "value": RUN_CACHE},
        {"name": contract.POD_IP.name, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": contract.POD_NAME.name, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    return own + [v.model_dump(by_alias=True, exclude_none=True, mode="json") for v in tp.spec.env]


def _resources(tp: TabularPrediction) -> dict[str, Any]:
    r = tp.spec.resources
    amounts = {"cpu": str(r.cpus), **({"memory": r.memory} if r.memory else {})}
    limits = {**amounts, **({r.gpu_resource: str(r.gpus)} if r.gpus else {})}
    return {"requests": dict(amounts), "limits": limits}


def build_scoring_pod(
    tp: TabularPrediction, ref: JobRef, model_uri: str, index: int, created: int, settings: Settings
) -> dict[str, Any]:
    spec, sched = tp.spec, tp.spec.scheduling
    labels = {
        LABEL_JOB: ref.name,  # the operator's watches select tabjob's children by this key
        LABEL_PREDICTION: ref.name,
        LABEL_INDEX: str(index),
        LABEL_ATTEMPT: str(max(0, created - 1)),
        "app.kubernetes.io/name": "tabjob",
        "app.kubernetes.io/instance": ref.name,
        "app.kubernetes.io/managed-by": "tabjob-operator",
        "app.kubernetes.io/component": "scorer",
    }
    annotations: dict[str, str] = {}
    if sched.queue_name:
        labels[contract.KUEUE_QUEUE_LABEL] = sched.queue_name
        labels[contract.KUEUE_GROUP_LABEL] = ref.name
        annotations[contract.KUEUE_GROUP_COUNT] = str(spec.parallelism)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.image or settings.default_image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["python", "-m", "tabjob_trainer.scoring"],
        "args": scoring_args(tp, model_uri, index, ref.uid, settings),
        "env": _env(tp),
        **(
            {"envFrom": [e.model_dump(by_alias=True, exclude_none=True, mode="json") for e in spec.env_from]}
            if spec.env_from
            else {}
        ),
        "ports": [{"name": "progress", "containerPort": settings.progress_port, "protocol": "TCP"}],
        "resources": _resources(tp),
        "volumeMounts": [{"name": "tmp", "mountPath": contract.SCRATCH_DIR}],
        "terminationMessagePath": contract.TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",  # the operator replaces a failed pod; the replacement skips committed shards
        "enableServiceLinks": False,
        "automountServiceAccountToken": spec.automount_service_account_token,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": settings.run_as_user,
            "runAsGroup": settings.run_as_user,
            "fsGroup": settings.run_as_user,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    if spec.service_account_name:
        pod_spec["serviceAccountName"] = spec.service_account_name
    if sched.node_selector:
        pod_spec["nodeSelector"] = dict(sched.node_selector)
    if sched.tolerations:
        pod_spec["tolerations"] = [t.model_dump(by_alias=True, exclude_none=True) for t in sched.tolerations]
    if sched.priority_class_name:
        pod_spec["priorityClassName"] = sched.priority_class_name
    meta = {
        "name": scoring_pod_name(ref.name, index, created),
        "namespace": ref.namespace,
        "labels": labels,
        "annotations": annotations,
        "ownerReferences": [owner_reference(ref)],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


def build_scoring_pods(tp: TabularPrediction, ref: JobRef, model_uri: str, settings: Settings) -> list[dict[str, Any]]:
    """Every pod's first incarnation (what `tabjob render` shows)."""
    return [build_scoring_pod(tp, ref, model_uri, i, 1, settings) for i in range(tp.spec.parallelism)]
