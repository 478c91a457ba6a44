"""Who a TabularJob is (group, version, kind, names), the labels on its children, and the limits that keep
every object tabjob creates within Kubernetes' own."""

from __future__ import annotations

GROUP = "tabjob.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TabularJob"
PLURAL = "tabularjobs"
SINGULAR = "tabularjob"
SHORT_NAMES = ["tj", "tabjob"]


# ------------------------------------------------------------------------------------------ limits
# Every object tabjob creates must stay within Kubernetes' limits; the planner refuses plans beyond these, and the
# CRD carries the ones that are plain arithmetic over the spec (SPEC_LIMIT_RULES), so both refuse the same specs.
MAX_PODS = 64  # status.plan.pods maxItems
MAX_LEADERBOARD_ROWS = 64  # status.models maxItems: one row per config and trial, plus the ensemble
MAX_FITS = 1000  # fits in one plan: every fit is a line of the plan ConfigMap
CONFIGMAP_LIMIT = 2**20  # bytes of a ConfigMap's data (keys and values), as the API server counts them
MAX_NAME = 50  # metadata.name: pods are <name>-<index>-r<attempt>, hostnames of at most 63
OUTPUT_DIR = "/output"


# Labels and annotations on a job's children: the operator writes them, the SDK and `tabjob logs` select by them.
LABEL_JOB = "tabjob.dev/job-name"
LABEL_RANK = "tabjob.dev/rank"  # the pod's node rank (its index in the plan)
LABEL_ATTEMPT = "tabjob.dev/attempt"
ANNOTATION_GENERATION = "tabjob.dev/generation"  # the job's spec generation a child was built from
