"""Trainer pods deleted while fits run: the job still succeeds, each deletion costs one retry (within
runPolicy.backoffLimit), and the fits finished before a deletion are reused by the next attempt, not refit.

The job's output is a PersistentVolumeClaim bound to a hostPath PersistentVolume this test creates as cluster
admin (the nodes share this machine's filesystem, so every node mounts the same directory, and the test reads the
trainer's records straight from it). What the trainer records for a reused fit: its `fits/<id>/result.json` is
left as it was (a refit rewrites it), and the attempt's rank logs a `FitResumed` event for it in
`progress.jsonl` instead of `FitStarted`/`FitEnded`.

Bounded and self-stopping: two deletions, then the job must succeed within DEADLINE.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hack.cluster.manifests import host_volume
from hack.cluster.paths import STATE
from tabjob.contracts.results import FitEvent, read_events
from tabjob_trainer.record import FitRecord
from tests.chaos.checks import pod_problems, record, status_problems, verdict
from tests.cluster.fixtures import Cluster
from tests.e2e.conftest import Operator
from tests.e2e.jobs import get, job, pods, status, wait_phase

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]
DEADLINE = 900.0  # seconds, for the whole run
NAME = "reuse"
FOLDS = 8
BACKOFF_LIMIT = 3
# (how the pod goes, which rank): a drain-like graceful delete of rank 1, then a forced delete of rank 0.
DELETIONS = [("graceful", "1"), ("force", "0")]


def _manifest() -> dict[str, Any]:
    # Eight bagged GBM folds of several seconds each, two pods of one CPU: each attempt runs them two at a time.
    slow_gbm = {"num_boost_round": 6000, "early_stopping_rounds": 0, "learning_rate": 0.01, "min_data_in_leaf": 2}
    return job(
        NAME,
        models={"GBM": [{"hyperparameters": slow_gbm}]},
        bagging={"folds": FOLDS},
        output={"path": f"/output/{NAME}", "volume": {"persistentVolumeClaim": {"claimName": "results"}}},
        runPolicy={"backoffLimit": BACKOFF_LIMIT},
        timeLimitSeconds=1800,
    )


@pytest.fixture
def results_volume(cluster: Cluster, namespace: str) -> Iterator[Path]:
    """A PVC `results` in the namespace, bound to a hostPath PV on a fresh directory; the directory is yielded.

    The directory lives in the cluster's state directory (removed by `make cluster-down`), not in pytest's
    temporary directories, which another pytest run on this machine may prune while the job runs.
    """
    pv = f"chaos-{uuid.uuid4().hex[:8]}"
    host = STATE / "volumes" / pv
    host.mkdir(parents=True)
    os.chmod(host, 0o777)  # the pods run as a non-root user; hostPath gets no fsGroup
    volume, claim = host_volume(pv, str(host), namespace, "results")
    cluster.kube.create("/api/v1/persistentvolumes", volume)
    try:
        cluster.kube.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim)
        cluster.wait_for(
            "the claim bound",
            lambda: (
                cluster.kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/results")
                .get("status", {})
                .get("phase")
                == "Bound"
            ),
            timeout=60,
        )
        yield host
    finally:
        cluster.kube.delete(f"/api/v1/persistentvolumes/{pv}")


def _events(out: Path) -> list[FitEvent]:
    return read_events(out)


def _done_fits(out: Path) -> dict[str, tuple[bytes, int, int]]:
    """Finished fits on the volume: id -> (result.json bytes, inode, mtime_ns)."""
    found = {}
    for d in (out / "fits").glob("[!.]*"):
        rec = d / "result.json"
        try:
            data, st = rec.read_bytes(), rec.stat()
        except OSError:
            continue
        if FitRecord.model_validate_json(data).succeeded:
            found[d.name] = (data, st.st_ino, st.st_mtime_ns)
    return found


def _running_pod(cluster: Cluster, ns: str, rank: str, attempt: int) -> str:
    def probe() -> str | None:
        for p in pods(cluster, ns, NAME):
            labels = p["metadata"]["labels"]
            ours = (labels["tabjob.dev/rank"], labels["tabjob.dev/attempt"]) == (rank, str(attempt))
            if ours and p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"):
                return str(p["metadata"]["name"])
        return None

    return cluster.wait_for(f"rank {rank} of attempt {attempt} running", probe, timeout=300)


@pytest.mark.timeout(DEADLINE + 300)
@pytest.mark.usefixtures("crd", "trainer_image")
def test_trainer_pods_deleted_mid_fit_reuse_finished_fits(
    cluster: Cluster, namespace: str, results_volume: Path, tmp_path: Path
) -> None:
    out = results_volume / NAME
    op = Operator(cluster, tmp_path / "operator.log")
    op.start()
    started = time.monotonic()
    deleted: list[tuple[str, float, dict[str, tuple[bytes, int, int]]]] = []  # (pod, when, fits done then)
    try:
        cluster.apply(_manifest(), namespace)
        for attempt, (how, rank) in enumerate(DELETIONS):
            pod = _running_pod(cluster, namespace, rank, attempt)
            # Some fits of this attempt finished (and fits are still to run), so the deletion lands mid-fit.
            before = len(_done_fits(out))
            cluster.wait_for(
                f"a fit finished in attempt {attempt}",
                lambda b=before: len(_done_fits(out)) >= max(b + 1, 2),  # type: ignore[misc]
                timeout=300,
            )
            done = _done_fits(out)
            assert len(done) < FOLDS, f"attempt {attempt} finished every fit before its pod could be deleted"
            args = ["--wait=false"] + (["--grace-period=0", "--force"] if how == "force" else [])
            cluster.kubectl("delete", "pod", "-n", namespace, pod, *args)
            deleted.append((pod, time.time(), done))
            cluster.wait_for(
                f"the retry after deleting {pod}",
                lambda a=attempt: int(status(cluster, namespace, NAME).get("restarts") or 0) > a,  # type: ignore[misc]
                timeout=240,
            )
        st = wait_phase(
            cluster, namespace, NAME, "Succeeded", timeout=max(60.0, DEADLINE - (time.monotonic() - started))
        )
    finally:
        op.kill(signal.SIGTERM)
    wall = time.monotonic() - started

    problems = pod_problems(cluster, namespace, NAME, st)
    problems += status_problems(NAME, st, get(cluster, namespace, NAME)["metadata"]["generation"])
    if verdict(st) != ("Succeeded", "Succeeded"):
        problems.append(f"verdict {verdict(st)}")
    # Each deletion is one retry of the group, within backoffLimit; the last failure names the last pod deleted.
    if st.get("restarts") != len(DELETIONS):
        problems.append(f"restarts {st.get('restarts')} != {len(DELETIONS)} deletions")
    if deleted[-1][0] not in (st.get("lastFailure") or ""):
        problems.append(f"lastFailure {st.get('lastFailure')!r} does not name {deleted[-1][0]}")

    events = _events(out)
    starts = [e for e in events if e.event == "JobStarted"]
    if len(starts) != len(DELETIONS) + 1:
        problems.append(f"{len(starts)} trainer runs (JobStarted) for {len(DELETIONS) + 1} attempts")
    final = _done_fits(out)
    reused: set[str] = set()
    for pod, when, done in deleted:
        resumed = {e.fit for e in events if e.event == "FitResumed" and e.t > when}
        for fit, (data, ino, mtime) in done.items():
            if final.get(fit) != (data, ino, mtime):
                problems.append(f"{fit}, finished before {pod} was deleted, was written again (refit)")
            if fit not in resumed:
                problems.append(f"{fit}, finished before {pod} was deleted, has no FitResumed after it")
            reused.add(fit)
    for fit in final:
        fits_done = [e for e in events if e.event == "FitEnded" and e.state == "Succeeded" and e.fit == fit]
        if len(fits_done) != 1:
            problems.append(f"{fit}: succeeded {len(fits_done)} times")
    if len(final) != FOLDS:
        problems.append(f"{len(final)} finished fits on the volume, {FOLDS} planned")
    record(
        "trainer pods deleted",
        f"deletions {len(deleted)}, restarts {st.get('restarts')}, verdict {verdict(st)[0]}, "
        f"fits reused {len(reused)} of {FOLDS} (finished before a deletion: "
        f"{', '.join(str(len(d)) for _, _, d in deleted)}; resumed per attempt "
        f"{', '.join(str(e.resumed) for e in starts)}), wall {wall:.0f} s, "
        f"problems {len(problems)}",
    )
    assert not problems, "\n".join(problems) + f"\nstatus: {json.dumps(st)[:1500]}"
