"""Pure builders: a TabularJob, its Plan and the job's identity -> the Kubernetes objects that run it.

Nothing here talks to the API server, so `tabjob render FILE` prints exactly what the operator creates, and the
unit tests compare plain dicts. Names are deterministic (a function of job name, pod index and attempt) so creating
them twice is an AlreadyExists, never a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tabjob.api import API_VERSION, KIND, TabularJob
from tabjob.contracts import pod as contract
from tabjob.contracts.plan import Plan, PodPlan
from tabjob.contracts.pod import ANNOTATION_GENERATION, LABEL_ATTEMPT, LABEL_JOB, LABEL_RANK
from tabjob.controller.config import Settings
from tabjob.planner.limits import configmap_data


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
            "ports": [{"name": contract.RENDEZVOUS_PORT_NAME, "port": settings.rendezvous_port, "protocol": "TCP"}],
        },
    }


def _env(name: str, value: str | int) -> dict[str, Any]:
    return {"name": name, "value": str(value)}


def _pod_env(
    plan: Plan, pod: PodPlan, index: int, ref: JobRef, job: TabularJob, settings: Settings
) -> list[dict[str, Any]]:
    """tabjob's variables (contracts/pod.py's POD_ENV and FIELD_ENV, which the spec refuses in spec.env), then the
    job's own: a job's value may refer to tabjob's as $(TABJOB_OUTPUT), and no name can appear twice."""
    threads = max(1, pod.cpus // max(1, pod.procs))
    values: dict[contract.Var, str | int] = {
        # The Kubeflow training operator's variables, so code written for PyTorchJob runs unchanged.
        contract.MASTER_ADDR: rendezvous_host(ref),
        contract.MASTER_PORT: settings.rendezvous_port,
        contract.WORLD_SIZE: plan.world_size,
        contract.RANK: index,
        contract.NNODES: len(plan.pods),
        contract.NPROC_PER_NODE: pod.procs,
        contract.NODE_RANK: index,
        contract.UNBUFFERED: "1",
        # torchrun sets OMP_NUM_THREADS=1 when it is unset; each rank owns its share of the pod's CPUs instead.
        contract.OMP_THREADS: threads,
        contract.MKL_THREADS: threads,
        contract.OPENBLAS_THREADS: threads,
        contract.SPEC: contract.SPEC_PATH,
        contract.PLAN: contract.PLAN_PATH,
        contract.OUTPUT: job.spec.output.path,
        contract.JOB_NAME: ref.name,
        contract.NAMESPACE: ref.namespace,
        contract.PROGRESS: settings.progress_port,
        contract.TERMINATION: contract.TERMINATION_LOG,
        contract.METRICS: settings.metrics_port,
    }
    own = [_env(var.name, values[var]) for var in contract.POD_ENV]
    own += [{"name": v.name, "valueFrom": {"fieldRef": {"fieldPath": v.field_path}}} for v in contract.FIELD_ENV]
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
    mounts: list[dict[str, Any]] = [{"name": "plan", "mountPath": contract.CONFIG_DIR, "readOnly": True}]
    if job.spec.data.volume:
        volumes.append({"name": "data", **job.spec.data.volume.to_pod_volume()})
        mounts.append({"name": "data", "mountPath": contract.DATA_DIR, "readOnly": True})
    # Without an output volume the results still reach status through the termination message; an emptyDir
    # keeps /output writable under a read-only image.
    output = job.spec.output.volume.to_pod_volume() if job.spec.output.volume else {"emptyDir": {}}
    volumes.append({"name": "output", **output})
    mounts.append({"name": "output", "mountPath": contract.OUTPUT_DIR})
    # The root filesystem is read-only; torch, matplotlib and the trainer's own scratch files go to /tmp.
    volumes.append({"name": "tmp", "emptyDir": {}})
    mounts.append({"name": "tmp", "mountPath": contract.SCRATCH_DIR})
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
        meta["labels"][contract.KUEUE_QUEUE_LABEL] = sched.queue_name
        meta["labels"][contract.KUEUE_GROUP_LABEL] = contract.group_name(ref.name, attempt)
        meta["annotations"][contract.KUEUE_GROUP_COUNT] = str(len(plan.pods))
        # Each group is admitted once: when none of its pods can run any more (an eviction, a failure, a suspend),
        # Kueue finishes its Workload and frees the quota, and the next attempt is a new group (docs/kueue.md).
        meta["annotations"][contract.KUEUE_RETRIABLE] = "false"
    volumes, mounts = _volumes(job, ref)
    rdzv_port, progress_port = settings.rendezvous_port, settings.progress_port
    container_ports = [{"name": contract.RENDEZVOUS_PORT_NAME, "containerPort": rdzv_port, "protocol": "TCP"}]
    if index == 0:
        container_ports.append({"name": contract.PROGRESS_PORT_NAME, "containerPort": progress_port, "protocol": "TCP"})
    # Every pod's first local rank serves its fits' Prometheus metrics (further local ranks on the next ports);
    # the chart's PodMonitor selects this port by name, so each pod is scraped.
    container_ports.append(
        {"name": contract.METRICS_PORT_NAME, "containerPort": settings.metrics_port, "protocol": "TCP"}
    )
    container: dict[str, Any] = {
        "name": contract.CONTAINER,
        "image": job.spec.image or settings.default_image,
        "imagePullPolicy": settings.image_pull_policy,
        # torchrun under the trainer's launcher, which tells torchrun's own failure (a rendezvous that never
        # completed) from the trainer's verdict in the termination message.
        "command": ["python", "-m", "tabjob_trainer.launch", "torchrun"],
        "args": _torchrun_args(plan, pod, index, ref, attempt, settings),
        "env": _pod_env(plan, pod, index, ref, job, settings),
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
        "terminationMessagePath": contract.TERMINATION_LOG,
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
