"""The trainer pod's boundary, declared once: every path, variable, port, label and key the operator's builders
write and something on the other side reads.

The builders (``controller/policy/builders.py``) write these; the trainer, the launcher and serving read them from
here; ``pod_identity`` refuses the variables in a job's ``spec.env``. tests/unit/test_contracts.py fails when one of
these literals is spelt anywhere else in the product, when the builders set a variable nothing reads, and when the
trainer reads a variable nothing sets.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal

from tabjob import __version__

# ---------------------------------------------------------------------------------------------------- the container
CONTAINER = "trainer"
TRAINER_REPOSITORY = "ghcr.io/tabjob/tabjob-trainer"  # the chart's trainer.image.repository
TRAINER_IMAGE = f"{TRAINER_REPOSITORY}:{__version__}"  # the Dockerfile's `trainer` target, tagged as the package
CONFIG_DIR = "/etc/tabjob"  # the plan ConfigMap, read-only
SPEC_KEY, PLAN_KEY = "spec.json", "plan.json"  # its keys, and so the files under CONFIG_DIR
SPEC_PATH, PLAN_PATH = f"{CONFIG_DIR}/{SPEC_KEY}", f"{CONFIG_DIR}/{PLAN_KEY}"
DATA_DIR = "/data"  # spec.data.volume, read-only
OUTPUT_DIR = "/output"  # spec.output.volume (an emptyDir without one); spec.output.path lies under it
SCRATCH_DIR = "/tmp"  # an emptyDir: the root filesystem is read-only
TERMINATION_LOG = "/dev/termination-log"  # the trainer's RunSummary (or the launcher's LauncherExit)

# ---------------------------------------------------------------------------------------------------------- ports
# Defaults of the operator's settings (controller/config.py) and of the chart's trainer.*Port values.
RENDEZVOUS_PORT = 29500  # torchrun's c10d store on pod 0 (the headless Service's port)
PROGRESS_PORT = 29501  # rank 0's ProgressSnapshot, read by the operator
METRICS_PORT = 29502  # each pod's first rank's Prometheus metrics; further local ranks take the next ports
# The container ports' names: the chart's PodMonitor selects `metrics` by name.
RENDEZVOUS_PORT_NAME, PROGRESS_PORT_NAME, METRICS_PORT_NAME = "rendezvous", "progress", "metrics"

# ------------------------------------------------------------------------------------------ labels and annotations
# On every child of a job: the operator writes them, the SDK, `tabjob logs` and the watches select by them.
LABEL_JOB = "tabjob.dev/job-name"
LABEL_RANK = "tabjob.dev/rank"  # the pod's node rank (its index in the plan)
LABEL_ATTEMPT = "tabjob.dev/attempt"
ANNOTATION_GENERATION = "tabjob.dev/generation"  # the job's spec generation a child was built from

# Kueue's plain-pod integration (docs/kueue.md): the pods of one attempt are one pod group, one Workload.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"  # an annotation
KUEUE_RETRIABLE = "kueue.x-k8s.io/retriable-in-group"  # an annotation


def group_name(job: str, attempt: int) -> str:
    """The pod group of one attempt, and so the name of the Workload Kueue creates for it."""
    return f"{job}-{attempt}"


_GROUP = re.compile(r"^(?P<job>.+)-(?P<attempt>\d+)$")


def job_of_workload(name: str) -> tuple[str, int] | None:
    """(job name, attempt) a Workload of ours would be named after (``group_name``'s inverse); None for any other."""
    m = _GROUP.match(name)
    return (m["job"], int(m["attempt"])) if m else None


# ------------------------------------------------------------------------------------------------------ variables
# Who reads a variable in the pod: the trainer (tabjob_trainer), torchrun (PET_* are its arguments), the native
# libraries' thread pools, the Python interpreter, or a job's own spec.env values, through $(NAME).
Reader = Literal["trainer", "torchrun", "libraries", "python", "job env"]


@dataclass(frozen=True)
class Var:
    name: str
    read_by: Reader
    meaning: str
    field_path: str | None = None  # set from the downward API rather than by value

    def get(self, default: str | None = None) -> str | None:
        """The value in this process's environment; empty counts as unset."""
        return os.environ.get(self.name) or default

    def get_int(self, default: int) -> int:
        value = self.get()
        return int(value) if value else default


# What the builders set, in the order `_pod_env` writes them (a job's own values may refer to them as $(NAME)).
MASTER_ADDR = Var("MASTER_ADDR", "trainer", "pod 0's DNS name: the torchrun store, which the progress counters share")
MASTER_PORT = Var("MASTER_PORT", "trainer", "the rendezvous port on MASTER_ADDR")
WORLD_SIZE = Var("WORLD_SIZE", "trainer", "ranks over all pods (torchrun sets the same in each worker)")
RANK = Var("RANK", "trainer", "the pod's index as the Kubeflow training operator sets it; torchrun sets each worker's")
NNODES = Var("PET_NNODES", "torchrun", "pods in the group")
NPROC_PER_NODE = Var("PET_NPROC_PER_NODE", "torchrun", "ranks in this pod")
NODE_RANK = Var("PET_NODE_RANK", "torchrun", "this pod's index in the group")
UNBUFFERED = Var("PYTHONUNBUFFERED", "python", "every log line reaches the pod's log as it is written")
OMP_THREADS = Var("OMP_NUM_THREADS", "libraries", "each rank's share of the pod's CPUs (torchrun would set 1)")
MKL_THREADS = Var("MKL_NUM_THREADS", "libraries", "the same, for MKL")
OPENBLAS_THREADS = Var("OPENBLAS_NUM_THREADS", "libraries", "the same, for OpenBLAS")
SPEC = Var("TABJOB_SPEC", "trainer", "the job's spec (SPEC_PATH)")
PLAN = Var("TABJOB_PLAN", "trainer", "the plan (PLAN_PATH)")
OUTPUT = Var("TABJOB_OUTPUT", "trainer", "spec.output.path")
JOB_NAME = Var("TABJOB_JOB_NAME", "trainer", "the TabularJob's name: the export's and spec.json's")
NAMESPACE = Var("TABJOB_NAMESPACE", "trainer", "the TabularJob's namespace, written into the run's spec.json")
PROGRESS = Var("TABJOB_PROGRESS_PORT", "trainer", "where rank 0 serves its ProgressSnapshot")
TERMINATION = Var("TABJOB_TERMINATION_LOG", "trainer", "where the RunSummary goes (TERMINATION_LOG)")
METRICS = Var("TABJOB_METRICS_PORT", "trainer", "where a pod's first rank serves Prometheus metrics")
POD_ENV: tuple[Var, ...] = (
    MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, NNODES, NPROC_PER_NODE, NODE_RANK, UNBUFFERED,
    OMP_THREADS, MKL_THREADS, OPENBLAS_THREADS, SPEC, PLAN, OUTPUT, JOB_NAME, NAMESPACE, PROGRESS, TERMINATION,
    METRICS,
)  # fmt: skip

# From the downward API, after those.
POD_IP = Var("POD_IP", "trainer", "the address the progress server binds and LightGBM's ranks reach", "status.podIP")
POD_NAME = Var("POD_NAME", "job env", "the pod's name, for a job's own values (spec.env refuses fieldRef)",
               "metadata.name")  # fmt: skip
SERVICE_ACCOUNT = Var("TABJOB_SERVICE_ACCOUNT", "trainer", "written into spec.json: `tabjob export --format kserve` "
                      "serves the model as the same identity", "spec.serviceAccountName")  # fmt: skip
FIELD_ENV: tuple[Var, ...] = (POD_IP, POD_NAME, SERVICE_ACCOUNT)

# Set by torchrun in each worker over whatever the pod says: the pod never sets them, a job may not either.
LOCAL_RANK = Var("LOCAL_RANK", "trainer", "the worker's index in its pod (torchrun's)")
TORCHRUN_ENV: tuple[Var, ...] = (
    LOCAL_RANK,
    *(Var(n, "torchrun", "torchrun's, for its workers") for n in (
        "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE")),
)  # fmt: skip

# The trainer's own settings that no operator pod sets: the launcher tells its workers, and a person or a test
# running the trainer by hand may set the others.
TRAINER_STARTED = Var("TABJOB_TRAINER_STARTED", "trainer", "the launcher's mark file: a worker touches it first")
STORAGE_RETRIES = Var("TABJOB_STORAGE_RETRIES", "trainer", "object storage attempts in all, the first included")
STORAGE_TIMEOUT = Var("TABJOB_STORAGE_TIMEOUT", "trainer", "object storage connect and request timeout, seconds")
RUN_CACHE = Var("TABJOB_RUN_CACHE", "trainer", "where runs read from object storage are cached on this machine")
LIGHTGBM_PRELOAD = Var("TABJOB_LIGHTGBM_PRELOAD", "trainer", "0: the entries do not run again with LightGBM's "
                       "library in LD_PRELOAD (tabjob_trainer/preload.py)")  # fmt: skip
TRAINER_SETTINGS: tuple[Var, ...] = (TRAINER_STARTED, STORAGE_RETRIES, STORAGE_TIMEOUT, RUN_CACHE, LIGHTGBM_PRELOAD)
