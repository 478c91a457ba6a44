"""The kopf layer, deliberately thin: watch events feed the Reconciler's cache and mark the job dirty.

Only `on.event` handlers are used. Kopf's change-driven handlers (create/update/delete) would store their progress
and a diff base on the object and act on edges; reconciling the observed state needs neither (kopf's own
"reconciliation" and "critiques" pages). With no deletion handler there is no finalizer, so a job can always be
deleted; its children go by owner reference.

The handlers keep no module state: the Reconciler, the leader elector and the election's task live in the
operator's `kopf.Memo` (`memo()` builds it; `tabjob operator` hands it to `kopf.operator`), which kopf passes to
every handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import kopf

from tabjob.api import GROUP, LABEL_JOB, PLURAL, VERSION
from tabjob.api.prediction import LABEL_PREDICTION, PREDICTION_PLURAL
from tabjob.controller.config import Settings
from tabjob.controller.policy import kueue
from tabjob.controller.runtime import metrics
from tabjob.controller.runtime.election import LeaderElector
from tabjob.controller.runtime.predictions import PredictionReconciler
from tabjob.controller.runtime.reconciler import Reconciler

log = logging.getLogger("tabjob.operator")
CHILDREN = ("pods", "configmaps", "services")  # core/v1 kinds the reconciler creates and watches
LIST_PAGE = 500  # objects per page of kopf's initial lists


class SharedMemo(kopf.Memo):
    """A memo that kopf hands to every object's handlers as it is. Kopf shallow-copies the operator's memo for each
    object it has ever seen and keeps the copy as long as the object exists (about 0.7 KiB each, four objects per
    job); this memo holds only operator-wide state, so one is enough."""

    def __copy__(self) -> SharedMemo:
        return self


def memo(
    reconciler: Reconciler, elector: LeaderElector | None = None, predictions: PredictionReconciler | None = None
) -> kopf.Memo:
    """The operator's state for kopf to hand every handler. With an elector the reconcilers work only while this
    replica holds the Lease; without, always."""
    return SharedMemo(reconciler=reconciler, elector=elector, campaign=None, predictions=predictions)


def _p(memo: kopf.Memo) -> PredictionReconciler | None:
    found = memo.get("predictions")
    return found if isinstance(found, PredictionReconciler) else None


def _r(memo: kopf.Memo) -> Reconciler:
    reconciler = memo.get("reconciler")
    if not isinstance(reconciler, Reconciler):
        raise RuntimeError("kopf.operator() was not given tabjob.controller.runtime.handlers.memo(...)")
    return reconciler


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base at all. Kopf builds one for every event of every watched object (a deep copy of the body, then a
    diff against the stored one) for change-driven handlers; this operator has only `on.event` handlers, which
    never read it, and the copy was the largest share of kopf's own CPU per event."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Should kopf ever need to remember anything, it goes to annotations: status holds only declared fields.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="tabjob.dev")
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.posting.enabled = False  # the reconciler posts its own Events, one per transition
    # The handlers' `labels=` filter runs in the operator, after kopf has received, decoded and remembered every
    # pod, ConfigMap and Service in the watched namespaces (the whole cluster by default): ask the API server for
    # our children only.
    for plural in CHILDREN:
        settings.watching.label_selectors["v1", plural] = LABEL_JOB
    # Kopf keeps one worker task per object while events flow; let idle ones go soon (memory with 1,000 jobs).
    settings.queueing.idle_timeout = 1.0
    # An operator (re)started beside thousands of jobs lists their pods, ConfigMaps and Services first: in pages,
    # so the list is never decoded whole (a one-off spike that the resident set would keep as its high-water mark).
    settings.watching.chunk_size = LIST_PAGE
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    reconciler, elector = _r(memo), memo.get("elector")
    if elector is None:
        metrics.LEADER.set(1)
        reconciler.start()
        if _p(memo) is not None:
            _p(memo).start()  # type: ignore[union-attr]
    else:  # the watches keep the cache warm on every replica; only the leader acts on it
        memo["campaign"] = asyncio.get_running_loop().create_task(elector.run())


@kopf.on.cleanup()
async def shutdown(memo: kopf.Memo, **_: Any) -> None:
    campaign: asyncio.Task[None] | None = memo.get("campaign")
    if campaign is not None:
        campaign.cancel()  # stops the work, then hands the Lease over
        with contextlib.suppress(asyncio.CancelledError):
            await campaign
    elif isinstance(memo.get("reconciler"), Reconciler):
        await _r(memo).stop()
        predictions = _p(memo)
        if predictions is not None:
            await predictions.stop()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def tabularjob_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    _r(memo).on_job(event.get("type"), dict(event["object"]))
    predictions = _p(memo)
    if predictions is not None:  # a prediction may wait for this job's run
        predictions.on_job(str(event["object"]["metadata"]["namespace"]))


@kopf.on.event("", "v1", "pods", labels={LABEL_JOB: kopf.PRESENT, LABEL_PREDICTION: kopf.ABSENT})
async def pod_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    _r(memo).on_child("Pod", event.get("type"), dict(event["object"]))


@kopf.on.event(GROUP, VERSION, PREDICTION_PLURAL)
async def tabularprediction_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    predictions = _p(memo)
    if predictions is not None:
        predictions.on_prediction(event.get("type"), dict(event["object"]))


@kopf.on.event("", "v1", "pods", labels={LABEL_PREDICTION: kopf.PRESENT})
async def prediction_pod_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    predictions = _p(memo)
    if predictions is not None:
        predictions.on_pod(event.get("type"), dict(event["object"]))


@kopf.on.event("", "v1", "configmaps", labels={LABEL_JOB: kopf.PRESENT})
async def configmap_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    _r(memo).on_child("ConfigMap", event.get("type"), dict(event["object"]))


@kopf.on.event("", "v1", "services", labels={LABEL_JOB: kopf.PRESENT})
async def service_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    _r(memo).on_child("Service", event.get("type"), dict(event["object"]))


async def workload_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """Kueue's Workloads: a queued job's pod group is admitted, waits, or is evicted (admission.py)."""
    _r(memo).on_workload(event.get("type"), dict(event["object"]))


if Settings().kueue:
    kopf.on.event(kueue.GROUP, kueue.VERSION, kueue.PLURAL)(workload_event)
