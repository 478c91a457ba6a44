"""Who a TabularJob is (group, version, kind, names), the labels on its children, and the limits that keep
every object tabjob creates within Kubernetes' own."""

from __future__ import annotations

from tabjob.contracts import pod

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
# The output volume's mount, and the labels and annotations on a job's children: declared with the rest of the pod's
# boundary (contracts/pod.py), and part of the API because the spec's output.path and the SDK's selectors use them.
OUTPUT_DIR = pod.OUTPUT_DIR
LABEL_JOB = pod.LABEL_JOB
LABEL_RANK = pod.LABEL_RANK
LABEL_ATTEMPT = pod.LABEL_ATTEMPT
ANNOTATION_GENERATION = pod.ANNOTATION_GENERATION
