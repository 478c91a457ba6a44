"""The kopf layer, deliberately thin: watch events feed the Reconciler's cache and mark the job dirty.

Only `on.event` handlers are used. Kopf's change-driven handlers (create/update/delete) would store their progress
and a diff base on the object and act on edges; reconciling the observed state needs neither (kopf's own
"reconciliation" and "critiques" pages). With no deletion handler there is no finalizer, so a job can always be
deleted; its children go by owner reference.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from tabjob.api import GROUP, LABEL_JOB, PLURAL, VERSION
from tabjob.operator.reconciler import Reconciler

log = logging.getLogger("tabjob.operator")
_reconciler: Reconciler | None = None


def install(reconciler: Reconciler) -> None:
    global _reconciler
    _reconciler = reconciler


def _r() -> Reconciler:
    if _reconciler is None:
        raise RuntimeError("tabjob.operator.handlers.install() was not called")
    return _reconciler


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Should kopf ever need to remember anything, it goes to annotations: status holds only declared fields.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="tabjob.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="tabjob.dev")
    settings.posting.enabled = False  # the reconciler posts its own Events, one per transition
    # Kopf keeps one worker task per object while events flow; let idle ones go soon (memory with 1,000 jobs).
    settings.batching.idle_timeout = 1.0
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    _r().queue.start()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def tabularjob_event(event: kopf.RawEvent, **_: Any) -> None:
    _r().on_job(event.get("type"), dict(event["object"]))


@kopf.on.event("", "v1", "pods", labels={LABEL_JOB: kopf.PRESENT})
async def pod_event(event: kopf.RawEvent, **_: Any) -> None:
    _r().on_child("Pod", event.get("type"), dict(event["object"]))


@kopf.on.event("", "v1", "configmaps", labels={LABEL_JOB: kopf.PRESENT})
async def configmap_event(event: kopf.RawEvent, **_: Any) -> None:
    _r().on_child("ConfigMap", event.get("type"), dict(event["object"]))


@kopf.on.event("", "v1", "services", labels={LABEL_JOB: kopf.PRESENT})
async def service_event(event: kopf.RawEvent, **_: Any) -> None:
    _r().on_child("Service", event.get("type"), dict(event["object"]))
