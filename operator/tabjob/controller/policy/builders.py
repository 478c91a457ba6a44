"""Pure builders: a TabularJob, its Plan and the job's identity -> the Kubernetes objects that run it.

Nothing here talks to the API server, so `tabjob render FILE` prints exactly what the operator creates, and the
unit tests compare plain dicts. Names are deterministic (a function of job name, pod index and attempt) so creating
them twice is an AlreadyExists, never a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tabjob.api import (
    ANNOTATION_GENERATION,
    API_VERSION,
    KIND,
    LABEL_ATTEMPT,
    LABEL_JOB,
    LABEL_RANK,
    TabularJob,
)
from tabjob.controller.config import Settings
from tabjob.plan_model import Plan, PodPlan
from tabjob.planner.limits import configmap_data
from tabjob.pod_identity import POD_ENV, POD_FIELD_ENV

KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_COUNT = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_RETRIABLE = "kueue.x-k8s.io/retriable-in-group"

CONFIG_DIR = "/etc/tabjob"
DATA_DIR = "/data"
OUTPUT_DIR = "/output"
TERMINATION_LOG = "/dev/termination-log"
CONTAINER = "trainer"


@dataclass(frozen=True)
class JobRef:
    """Who owns the children: enough of the TabularJob's metadata for names, owner references and labels."""

    name: str
    namespace: str
    uid: str
    generation: int = 1


@dataclass(frozen=True)
class Children:
    configmap: dict[str, Any]
    service: dict[str, Any]
    pods: list[dict[str, Any]]

    def all(self) -> list[dict[str, Any]]:
        return [self.configmap, self.service, *self.pods]


def configmap_name(job: str) -> str:
    return f"{job}-plan"


# Seconds a torchrun agent keeps trying to reach its rendezvous store (see _torchrun_args).
RENDEZVOUS_READ_TIMEOUT = 600


def pod_name(job: str, index: int, attempt: int) -> str:
    # Attempt 0 keeps the plan's names (quickstart-0); a retry gets fresh names so it never waits on, or
    # collides with, a terminating pod of the previous group.
    return f"{job}-{index}" if attempt == 0 else f"{job}-{index}-r{attempt}"


def rendezvous_host(ref: JobRef) -> str:
    """Pod 0's stable DNS name under the headless Service (its hostname stays `<job>-0` across attempts)."""
    return f"{ref.name}-0.{ref.name}.{ref.namespace}.svc"


def owner_reference(ref: JobRef) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": ref.name,
        "uid": ref.uid,
        "controller": True,
        # Foreground deletion of the job waits for its pods; garbage collection removes them either way.
        "blockOwnerDeletion": True,
    }


def _labels(ref: JobRef) -> dict[str, str]:
    return {
        LABEL_JOB: ref.name,
        "app.kubernetes.io/name": "tabjob",
        "app.kubernetes.io/instance": ref.name,
        "app.kubernetes.io/managed-by": "tabjob-operator",
    }


def _meta(name: str, ref: JobRef, component: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": ref.namespace,
        "labels": {**_labels(ref), "app.kubernetes.io/component": component},
        "annotations": {ANNOTATION_GENERATION: str(ref.generation)},
        "ownerReferences": [owner_reference(ref)],
    }


def build_configmap(job: TabularJob, plan: Plan, ref: JobRef) -> dict[str, Any]:
    """The spec and the full plan (every fit), mounted read-only into each pod at /etc/tabjob."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(configmap_name(ref.name), ref, "plan"),
        # The planner measured this very data against the 1 MiB limit when it made the plan.
        "data": configmap_data(job.spec, plan),
    }


def build_service(ref: JobRef, settings: Settings) -> dict[str, Any]:
    """Headless Service: gives pod 0 the DNS name the other pods rendezvous on."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(ref.name, ref, "rendezvous"),
        "spec": {
            "clusterIP": "None",
            "selector": {LABEL_JOB: ref.name},
            # Peers must resolve pod 0 before it is Ready: torchrun starts the store while the pod starts.
            "publishNotReadyAddresses": True,
            "ports": [{"name": "rendezvous", "port": settings.rendezvous_port, "protocol": "TCP"}],
        },
    }


def _env(name: str, value: str | int) -> dict[str, Any]:
    return {"name": name, "value": str(value)}


def _pod_env(
    plan: Plan, pod: PodPlan, index: int, ref: JobRef, job: TabularJob, attempt: int, settings: Settings
) -> list[dict[str, Any]]:
    """tabjob's variables (pod_identity.POD_ENV, which the spec refuses in spec.env), then the job's own: a job's
    value may refer to tabjob's as $(TABJOB_OUTPUT), and no name can appear twice."""
    threads = max(1, pod.cpus // max(1, pod.procs))
    values: dict[str, str | int] = {
        # The Kubeflow training operator's variables, so code written for PyTorchJob runs unchanged.
        "MASTER_ADDR": rendezvous_host(ref),
        "MASTER_PORT": settings.rendezvous_port,
        "WORLD_SIZE": plan.world_size,
        "RANK": index,
        "PET_NNODES": len(plan.pods),
        "PET_NPROC_PER_NODE": pod.procs,
        "PET_NODE_RANK": index,
        "PYTHONUNBUFFERED": "1",
        # torchrun sets OMP_NUM_THREADS=1 when it is unset; each rank owns its share of the pod's CPUs instead.
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "TABJOB_SPEC": f"{CONFIG_DIR}/spec.json",
        "TABJOB_PLAN": f"{CONFIG_DIR}/plan.json",
        "TABJOB_OUTPUT": job.spec.output.path,
        "TABJOB_JOB_NAME": ref.name,
        "TABJOB_NAMESPACE": ref.namespace,
        "TABJOB_ATTEMPT": attempt,
        "TABJOB_NODE_RANK": index,
        "TABJOB_PROGRESS_PORT": settings.progress_port,
        "TABJOB_TERMINATION_LOG": TERMINATION_LOG,
        "TABJOB_METRICS_PORT": settings.metrics_port,
    }
    own = [_env(name, values[name]) for name in POD_ENV]
    own += [{"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}} for name, path in POD_FIELD_ENV.items()]
    return own + [var.model_dump(by_alias=True, exclude_none=True, mode="json") for var in job.spec.env]


def _resources(pod: PodPlan, gpu_resource: str) -> dict[str, Any]:
    amounts: dict[str, str] = {"cpu": str(pod.cpus)}
    if pod.memory:
        amounts["memory"] = pod.memory
    limits = dict(amounts)
    if pod.gpus > 0:
        # Whole GPUs only: fractional fits are packed onto a rank's GPU by the plan, never requested as 0.5.
        limits[gpu_resource] = str(int(pod.gpus))
    # Requests equal limits: Guaranteed QoS, so a neighbour cannot starve a rank mid-rendezvous.
    return {"requests": dict(amounts), "limits": limits}


def _volumes(job: TabularJob, ref: JobRef) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [{"name": "plan", "configMap": {"name": configmap_name(ref.name)}}]
    mounts: list[dict[str, Any]] = [{"name": "plan", "mountPath": CONFIG_DIR, "readOnly": True}]
    if job.spec.data.volume:
        volumes.append({"name": "data", **job.spec.data.volume.to_pod_volume()})
        mounts.append({"name": "data", "mountPath": DATA_DIR, "readOnly": True})
    # Without an output volume the results still reach status through the termination message; an emptyDir
    # keeps /output writable under a read-only image.
    output = job.spec.output.volume.to_pod_volume() if job.spec.output.volume else {"emptyDir": {}}
    volumes.append({"name": "output", **output})
    mounts.append({"name": "output", "mountPath": OUTPUT_DIR})
    # The root filesystem is read-only; torch, matplotlib and the trainer's own scratch files go to /tmp.
    volumes.append({"name": "tmp", "emptyDir": {}})
    mounts.append({"name": "tmp", "mountPath": "/tmp"})
    return volumes, mounts


def _torchrun_args(plan: Plan, pod: PodPlan, index: int, ref: JobRef, attempt: int, settings: Settings) -> list[str]:
    nnodes = len(plan.pods)
    return [
        f"--nnodes={nnodes}",
        f"--nproc-per-node={pod.procs}",
        f"--node-rank={index}",
        "--rdzv-backend=c10d",
        # Every rank, pod 0 too, names the store by the headless Service's DNS record, which exists as soon as
        # pod 0 has an address (publishNotReadyAddresses).
        f"--rdzv-endpoint={rendezvous_host(ref)}:{settings.rendezvous_port}",
        # A new id per attempt: a retried group never joins the previous group's rendezvous.
        f"--rdzv-id={ref.uid}-{attempt}",
        # Pod 0 hosts the c10d store, so the endpoint's name always points at the store. The store connection
        # retries a name DNS cannot resolve yet until read_timeout (torch's default 60 s): a pod started during a
        # control-plane outage (no EndpointSlice, no DNS record) must outwait it, as long as it waits for its
        # peers (join_timeout, 600 s), or torchrun exits 1 and the job fails as if the trainer had said so.
        f"--rdzv-conf=is_host={'1' if index == 0 else '0'},read_timeout={RENDEZVOUS_READ_TIMEOUT}",
        # The operator recreates the whole group on failure; torchrun restarting ranks in place would hide it.
        "--max-restarts=0",
        "-m",
        "tabjob_trainer",
    ]


def build_pod(job: TabularJob, plan: Plan, ref: JobRef, index: int, attempt: int, settings: Settings) -> dict[str, Any]:
    pod = plan.pods[index]
    sched = job.spec.scheduling
    meta = _meta(pod_name(ref.name, index, attempt), ref, "trainer")
    meta["labels"].update({LABEL_RANK: str(index), LABEL_ATTEMPT: str(attempt)})
    if sched.queue_name:
        # Kueue's plain-pod integration: the pods of one attempt are admitted together as one group.
        meta["labels"][KUEUE_QUEUE] = sched.queue_name
        meta["labels"][KUEUE_GROUP] = f"{ref.name}-{attempt}"
        meta["annotations"][KUEUE_COUNT] = str(len(plan.pods))
        # Each group is admitted once: when none of its pods can run any more (an eviction, a failure, a suspend),
        # Kueue finishes its Workload and frees the quota, and the next attempt is a new group (docs/kueue.md).
        meta["annotations"][KUEUE_RETRIABLE] = "false"
    volumes, mounts = _volumes(job, ref)
    rdzv_port, progress_port = settings.rendezvous_port, settings.progress_port
    container_ports = [{"name": "rendezvous", "containerPort": rdzv_port, "protocol": "TCP"}]
    if index == 0:
        container_ports.append({"name": "progress", "containerPort": progress_port, "protocol": "TCP"})
    # Every pod's first local rank serves its fits' Prometheus metrics (further local ranks on the next ports);
    # the chart's PodMonitor selects this port by name, so each pod is scraped.
    container_ports.append({"name": "metrics", "containerPort": settings.metrics_port, "protocol": "TCP"})
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": job.spec.image or settings.default_image,
        "imagePullPolicy": settings.image_pull_policy,
        # torchrun under the trainer's launcher, which tells torchrun's own failure (a rendezvous that never
        # completed) from the trainer's verdict in the termination message.
        "command": ["python", "-m", "tabjob_trainer.launch", "torchrun"],
        "args": _torchrun_args(plan, pod, index, ref, attempt, settings),
        "env": _pod_env(plan, pod, index, ref, job, attempt, settings),
        # Kubernetes gives env precedence over envFrom: a Secret's key named like one of tabjob's variables is
        # overridden by tabjob's value (the operator never reads Secrets, so it cannot refuse such a key).
        **(
            {"envFrom": [e.model_dump(by_alias=True, exclude_none=True, mode="json") for e in job.spec.env_from]}
            if job.spec.env_from
            else {}
        ),
        "ports": container_ports,
        "resources": _resources(pod, plan.gpu_resource),
        "volumeMounts": mounts,
        "terminationMessagePath": TERMINATION_LOG,
        # The trainer writes a JSON summary there; when it crashes first, the log tail says why.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",  # the operator recreates the whole torchrun group instead
        "hostname": f"{ref.name}-{index}",
        "subdomain": ref.name,
        "enableServiceLinks": False,
        # Results travel by termination message: no API credentials unless the job asks for its account's token.
        "automountServiceAccountToken": job.spec.automount_service_account_token,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": settings.run_as_user,
            "runAsGroup": settings.run_as_user,
            "fsGroup": settings.run_as_user,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    }
    if job.spec.service_account_name:
        spec["serviceAccountName"] = job.spec.service_account_name
    if sched.node_selector:
        spec["nodeSelector"] = dict(sched.node_selector)
    if sched.tolerations:
        spec["tolerations"] = [t.model_dump(by_alias=True, exclude_none=True) for t in sched.tolerations]
    if sched.priority_class_name:
        spec["priorityClassName"] = sched.priority_class_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def build_pods(job: TabularJob, plan: Plan, ref: JobRef, attempt: int, settings: Settings) -> list[dict[str, Any]]:
    return [build_pod(job, plan, ref, i, attempt, settings) for i in range(len(plan.pods))]


def build_children(job: TabularJob, plan: Plan, ref: JobRef, attempt: int, settings: Settings) -> Children:
    return Children(
        configmap=build_configmap(job, plan, ref),
        service=build_service(ref, settings),
        pods=build_pods(job, plan, ref, attempt, settings),
    )
