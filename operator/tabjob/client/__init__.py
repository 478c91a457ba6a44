"""Python SDK: submit a TabularJob, follow it, read its leaderboard and logs, delete it.

    import tabjob
    c = tabjob.Client(namespace="ml")
    c.submit("examples/quickstart.yaml")
    job = c.wait("quickstart")          # a progress bar on a terminal; returns the final object
    for row in c.leaderboard("quickstart"):
        print(row["name"], row.get("scoreVal"))

Manifests are validated and planned locally first, so a mistake is reported with its field before anything
reaches the cluster. Needs the `operator` extra (the kubernetes client).

A TabularPrediction goes the same way: `submit` takes its manifest, and every method taking a name takes
`tp/NAME` (or `tabularprediction/NAME`) for one, as kubectl does:

    c.submit("nightly-scores.yaml")
    c.wait("tp/nightly-scores")         # rows scored of the total
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from tabjob.api import (
    GROUP,
    LABEL_ATTEMPT,
    LABEL_JOB,
    LABEL_RANK,
    PLURAL,
    VERSION,
    TabularJob,
    load_manifest,
    parse_manifest,
    to_manifest,
)
from tabjob.api.prediction import LABEL_INDEX, LABEL_PREDICTION, PREDICTION_PLURAL, TabularPrediction
from tabjob.api.prediction_parse import is_prediction, parse_prediction, prediction_manifest
from tabjob.client.kueue_visibility import VERSIONS as VISIBILITY_VERSIONS
from tabjob.client.kueue_visibility import PendingWorkloadsSummary, pending_workloads_path
from tabjob.planner import plan_job

FINISHED = ("Succeeded", "Failed")
PREDICTION_PREFIXES = ("tp/", "tabularprediction/", "tabularpredictions/", "tabularprediction.tabjob.dev/")


def split_ref(ref: str) -> tuple[str, str]:
    """(plural, name) of `NAME` (a TabularJob, or `tj/NAME`) or `tp/NAME` (a TabularPrediction)."""
    for prefix in PREDICTION_PREFIXES:
        if ref.startswith(prefix):
            return PREDICTION_PLURAL, ref[len(prefix) :]
    for prefix in ("tj/", "tabjob/", "tabularjob/", "tabularjobs/", "tabularjob.tabjob.dev/"):
        if ref.startswith(prefix):
            return PLURAL, ref[len(prefix) :]
    return PLURAL, ref


class JobFailed(RuntimeError):
    """The job ended Failed; `job` holds the final object."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        status = job.get("status") or {}
        super().__init__(f"{job['metadata']['name']} failed: {status.get('message') or 'see its conditions'}")


class VisibilityUnavailable(RuntimeError):
    """Kueue's visibility API did not answer (not installed, its APIService unavailable, forbidden, ...)."""


class Client:
    def __init__(self, namespace: str | None = None, kubeconfig: str | None = None, context: str | None = None):
        from kubernetes import client, config

        try:
            if kubeconfig or context:
                raise config.ConfigException("explicit kubeconfig")
            config.load_incluster_config()
            cfg = client.Configuration.get_default_copy()
            default_ns = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read_text().strip()
        except (config.ConfigException, OSError):
            cfg = client.Configuration()
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
            _, active = config.list_kube_config_contexts(config_file=kubeconfig)
            default_ns = (active or {}).get("context", {}).get("namespace") or "default"
        self._api = client.ApiClient(cfg)
        self.core = client.CoreV1Api(self._api)
        self.custom = client.CustomObjectsApi(self._api)
        self.namespace = namespace or default_ns

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    def submit(
        self, manifest: str | Path | dict[str, Any] | TabularJob | TabularPrediction, namespace: str | None = None
    ) -> dict[str, Any]:
        """Create the job (or prediction); a file, a manifest dict, a TabularJob or a TabularPrediction. Raises
        SpecError before contacting the API."""
        if isinstance(manifest, str | Path):
            from tabjob.api import load_documents

            docs = load_documents(manifest)
            if len(docs) == 1 and is_prediction(docs[0]):
                manifest = parse_prediction(docs[0])
        elif isinstance(manifest, dict) and is_prediction(manifest):
            manifest = parse_prediction(manifest)
        if isinstance(manifest, TabularPrediction):
            body = prediction_manifest(manifest)
            body.pop("status", None)
            ns = self._ns(namespace or manifest.metadata.namespace)
            body["metadata"]["namespace"] = ns
            create = self.custom.create_namespaced_custom_object
            return cast(dict[str, Any], create(GROUP, VERSION, ns, PREDICTION_PLURAL, body))
        if isinstance(manifest, str | Path):
            job = load_manifest(manifest)
        elif isinstance(manifest, dict):
            job = parse_manifest(manifest)
        else:
            job = manifest
        plan_job(job)  # the planner's checks, with the field named, before the API server sees it
        body = to_manifest(job)
        body.pop("status", None)
        ns = self._ns(namespace or job.metadata.namespace)
        body["metadata"]["namespace"] = ns
        return cast(dict[str, Any], self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body))

    def get(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        plural, name = split_ref(name)
        obj = self.custom.get_namespaced_custom_object(GROUP, VERSION, self._ns(namespace), plural, name)
        return cast(dict[str, Any], obj)

    def jobs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        resp = cast(
            dict[str, Any], self.custom.list_namespaced_custom_object(GROUP, VERSION, self._ns(namespace), PLURAL)
        )
        return list(resp.get("items", []))

    def status(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        return dict(self.get(name, namespace).get("status") or {})

    def leaderboard(self, name: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return list(self.status(name, namespace).get("models") or [])

    def wait(
        self,
        name: str,
        namespace: str | None = None,
        timeout: float | None = None,
        progress: bool = True,
        raise_on_failure: bool = False,
    ) -> dict[str, Any]:
        """Block until the job is Succeeded or Failed; a rich progress bar of fits done when `progress`."""
        from kubernetes import watch

        deadline = None if timeout is None else time.monotonic() + timeout
        ns = self._ns(namespace)
        job = self.get(name, ns)
        plural, ref, name = split_ref(name)[0], name, split_ref(name)[1]
        bar = _Bar(name) if progress else None
        try:
            while not _finished(job):
                if bar:
                    bar.update(job)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"{name} is still {(job.get('status') or {}).get('phase', 'Pending')}")
                w = watch.Watch()
                stream = w.stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    ns,
                    plural,
                    field_selector=f"metadata.name={name}",
                    resource_version=job["metadata"]["resourceVersion"],
                    timeout_seconds=int(min(left, 60)) if left is not None else 60,
                )
                for event in stream:
                    if event["type"] == "DELETED":
                        raise RuntimeError(f"{name} was deleted")
                    job = event["object"]
                    if bar:
                        bar.update(job)
                    if _finished(job):
                        w.stop()
                        break
                else:
                    job = self.get(ref, ns)  # the watch timed out or expired: re-read, then watch again
            if bar:
                bar.update(job)
        finally:
            if bar:
                bar.close()
        if raise_on_failure and (job.get("status") or {}).get("phase") == "Failed":
            raise JobFailed(job)
        return job

    def pending_workloads(self, local_queue: str, namespace: str | None = None) -> PendingWorkloadsSummary:
        """The pending Workloads of a LocalQueue, in Kueue's order, from Kueue's visibility API (the newest version
        the API server serves). Raises VisibilityUnavailable, with why, when no version answers."""
        from kubernetes.client import ApiException
        from pydantic import ValidationError
        from urllib3.exceptions import HTTPError

        why = "no version of visibility.kueue.x-k8s.io is served"
        for version in VISIBILITY_VERSIONS:
            path = pending_workloads_path(version, self._ns(namespace), local_queue)
            try:
                return PendingWorkloadsSummary.model_validate_json(self._get_raw(path))
            except ApiException as exc:
                why = f"GET {path}: HTTP {exc.status} {exc.reason}"
                if exc.status != 404:  # 404: this version is not served (or the queue is missing); try the next
                    break
            except (HTTPError, OSError) as exc:
                why = f"GET {path}: {exc}"
                break
            except ValidationError as exc:
                why = f"GET {path}: an answer not shaped like PendingWorkloadsSummary ({exc.error_count()} errors)"
                break
        raise VisibilityUnavailable(why)

    def _get_raw(self, path: str) -> bytes:
        """GET a path no generated API class covers (an aggregated API); raises ApiException unless 2xx."""
        from kubernetes.client import ApiException

        api: Any = self._api
        headers = {"Accept": "application/json"}
        if not hasattr(api, "param_serialize"):  # kubernetes < 35: the older generator's call_api
            return bytes(
                api.call_api(
                    path, "GET", header_params=headers, auth_settings=["BearerToken"], _preload_content=False,
                    _return_http_data_only=True, _request_timeout=10,
                ).data
            )  # fmt: skip
        method, url, hdrs, body, post = api.param_serialize(
            "GET", path, header_params=headers, auth_settings=["BearerToken"]
        )
        resp = api.call_api(method, url, hdrs, body, post, _request_timeout=10)
        data = bytes(resp.read())
        if not 200 <= resp.status <= 299:
            raise ApiException(status=resp.status, reason=resp.reason)
        return data

    def pods(self, name: str, namespace: str | None = None) -> list[dict[str, Any]]:
        plural, name = split_ref(name)
        selector = (
            f"{LABEL_PREDICTION}={name}" if plural == PREDICTION_PLURAL else f"{LABEL_JOB}={name},!{LABEL_PREDICTION}"
        )
        resp = self.core.list_namespaced_pod(self._ns(namespace), label_selector=selector)
        return [self._api.sanitize_for_serialization(p) for p in resp.items]

    def _pod_of_rank(self, name: str, rank: int, namespace: str | None) -> str:
        label = LABEL_INDEX if split_ref(name)[0] == PREDICTION_PLURAL else LABEL_RANK
        pods = [p for p in self.pods(name, namespace) if p["metadata"]["labels"].get(label) == str(rank)]
        if not pods:
            raise LookupError(f"{name} has no pod of node rank {rank}")
        latest = max(pods, key=lambda p: int(p["metadata"]["labels"].get(LABEL_ATTEMPT, "0")))
        return str(latest["metadata"]["name"])

    def logs(
        self, name: str, rank: int = 0, namespace: str | None = None, follow: bool = False, tail: int | None = None
    ) -> Iterator[str]:
        """Lines of the trainer's log on the pod of node `rank` (the latest attempt)."""
        ns = self._ns(namespace)
        pod = self._pod_of_rank(name, rank, ns)
        kwargs: dict[str, Any] = {"container": "scorer" if split_ref(name)[0] == PREDICTION_PLURAL else "trainer"}
        if tail is not None:
            kwargs["tail_lines"] = tail
        if follow:
            resp = self.core.read_namespaced_pod_log(pod, ns, follow=True, _preload_content=False, **kwargs)
            for chunk in resp.stream():  # type: ignore[attr-defined]
                yield from chunk.decode(errors="replace").splitlines()
        else:
            yield from str(self.core.read_namespaced_pod_log(pod, ns, **kwargs)).splitlines()

    def delete(self, name: str, namespace: str | None = None, wait: bool = False, timeout: float = 60) -> None:
        """Delete the job; its pods, Service and ConfigMap go with it (owner references)."""
        from kubernetes.client import ApiException

        ns = self._ns(namespace)
        ref, (plural, name) = name, split_ref(name)
        self.custom.delete_namespaced_custom_object(
            GROUP, VERSION, ns, plural, name, propagation_policy="Foreground" if wait else "Background"
        )
        end = time.monotonic() + timeout
        while wait and time.monotonic() < end:
            try:
                self.get(ref, ns)
            except ApiException as exc:
                if exc.status == 404:
                    return
                raise
            time.sleep(0.5)


def _finished(job: dict[str, Any]) -> bool:
    status = job.get("status") or {}
    if status.get("phase") not in FINISHED:
        return False
    # InvalidSpec is Failed without a completion time; anything else finished has one.
    return bool(status.get("completionTime")) or status.get("phase") == "Failed"


class _Bar:
    """Fits done of fits total, with the phase and best score so far."""

    def __init__(self, name: str) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as ProgressBar

        self.progress = ProgressBar(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[phase]}"),
            TextColumn("{task.fields[best]}"),
            TimeElapsedColumn(),
            transient=False,
        )
        self.task = self.progress.add_task(name, total=None, phase="Pending", best="")
        self.progress.start()

    def update(self, job: dict[str, Any]) -> None:
        status = job.get("status") or {}
        if job.get("kind") == "TabularPrediction":  # rows scored of the total
            self.progress.update(
                self.task, total=status.get("rowsTotal") or None, completed=status.get("rowsScored") or 0,
                phase=status.get("phase") or "Pending", best=f"{status.get('rowsPerSecond') or 0:g} rows/s",
            )  # fmt: skip
            return
        prog = status.get("progress") or {}
        best = prog.get("bestScore", status.get("score"))
        self.progress.update(
            self.task,
            total=prog.get("fitsTotal") or None,
            completed=prog.get("fitsDone") or 0,
            phase=status.get("phase") or "Pending",
            best=f"best {best:.4g}" if isinstance(best, int | float) else "",
        )

    def close(self) -> None:
        self.progress.stop()
