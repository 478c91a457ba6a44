"""The operator end to end: kubectl against the local control plane, the real trainer in the pods.

Each test gets a fresh namespace; the operator runs once per session as a subprocess (`tabjob operator`).
Manifests are small (breast_cancer, few rounds/epochs) so the whole module stays within a few minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tabjob.contracts.results import FitEvent
from tests.cluster.fixtures import Cluster
from tests.e2e.children import spawn
from tests.e2e.conftest import Operator, _free_port
from tests.e2e.jobs import condition, get, job, pods, slow_job, status, wait_condition, wait_phase

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_quickstart_two_pod_cpu_job_succeeds(cluster: Cluster, operator: Operator, namespace: str) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", str(REPO / "examples" / "quickstart.yaml"))
    st = wait_condition(cluster, namespace, "quickstart", "Succeeded", timeout=420)
    assert st["phase"] == "Succeeded"
    assert condition(st, "Ready")["status"] == "True"
    assert st["bestModel"] and isinstance(st["score"], float)
    assert st["plan"]["worldSize"] == 2 and len(pods(cluster, namespace, "quickstart")) == 2
    assert st["progress"]["fitsDone"] == st["progress"]["fitsTotal"] > 0
    # Both pods' torchrun agents joined one group: each pod completed, and each pod's log shows the fits it did.
    assert {p["status"]["phase"] for p in pods(cluster, namespace, "quickstart")} == {"Succeeded"}
    for pod in pods(cluster, namespace, "quickstart"):
        log = cluster.kubectl("logs", "-n", namespace, pod["metadata"]["name"]).stdout
        events = [FitEvent.model_validate_json(line) for line in log.splitlines() if line.startswith('{"t":')]
        assert any(e.event == "FitEnded" and e.state == "Succeeded" for e in events), (
            f"{pod['metadata']['name']}'s log:\n{log}"
        )
    assert st["models"], "the leaderboard must reach status (the trainer's termination message carries it)"
    assert "tabjob_jobs" in operator.metrics()


def test_gpu_job_whole_gpu_limits_on_gpu_nodes_falls_back_to_cpu(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    manifest = job(
        "gpu",
        resources={"cpus": 2, "gpus": 2, "gpusPerPod": 1, "memory": "4Gi"},
        models={"NN_TORCH": [{"resources": {"cpus": 1, "gpus": 1}, "hyperparameters": {"num_epochs": 5}}]},
        onGpuUnavailable="FallbackToCPU",
    )
    cluster.apply(manifest, namespace)
    st = wait_condition(cluster, namespace, "gpu", "Succeeded", timeout=300)
    plan_gpus = [p["gpus"] for p in st["plan"]["pods"]]
    assert plan_gpus == [1, 1] and st["requestedGpus"] == 2
    for pod in pods(cluster, namespace, "gpu"):
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "1"
        assert pod["spec"]["nodeName"].startswith("gpu-node"), pod["spec"]["nodeName"]
    said = st.get("fallbacks") or "fell back" in st.get("message", "")
    said = said or any(m.get("device") == "cpu" and (m.get("gpus") or 0) > 0 for m in st.get("models") or [])
    assert said, f"a GPU job that ran on CPU must say so in status: {json.dumps(st, indent=1)}"


def test_too_many_gpus_per_pod_stays_pending_and_others_are_served(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    big = job(
        "big",
        resources={"cpus": 8, "gpus": 8, "gpusPerPod": 8, "memory": "8Gi"},
        models={"NN_TORCH": [{"resources": {"cpus": 1, "gpus": 1}}]},
        bagging={"folds": 8},
    )
    cluster.apply(big, namespace)
    cluster.apply(job("small"), namespace)
    st = wait_condition(cluster, namespace, "big", "Stalled", timeout=120)
    assert st["phase"] == "Pending"
    stalled = condition(st, "Stalled")
    assert stalled["reason"] == "Unschedulable"
    assert "nvidia.com/gpu" in stalled["message"], stalled
    wait_condition(cluster, namespace, "small", "Succeeded")
    assert status(cluster, namespace, "big")["phase"] == "Pending"


def test_killed_trainer_pod_retries_the_group_and_succeeds(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    cluster.apply(slow_job("retry", runPolicy={"backoffLimit": 2}), namespace)
    wait_phase(cluster, namespace, "retry", "Running", timeout=120)
    cluster.kubectl("delete", "pod", "-n", namespace, "retry-1", "--grace-period=0", "--force", check=False)
    st = wait_condition(cluster, namespace, "retry", "Succeeded", timeout=420)
    assert st["restarts"] >= 1
    assert "retry-1" in st["lastFailure"]
    assert {p["metadata"]["labels"]["tabjob.dev/attempt"] for p in pods(cluster, namespace, "retry")} == {
        str(st["restarts"])
    }


def test_operator_killed_mid_creation_leaves_no_duplicates(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    operator.kill()
    try:
        manifest = job("nodup", resources={"cpus": 3, "cpusPerPod": 1, "memory": "6Gi"}, bagging={"folds": 3})
        cluster.apply(manifest, namespace)
        operator.start()
        cluster.wait_for("a first pod", lambda: pods(cluster, namespace, "nodup"), timeout=60)
        operator.kill()  # somewhere between the first pod and the status patch
    finally:
        operator.start()
    wait_condition(cluster, namespace, "nodup", "Succeeded")
    names = sorted(p["metadata"]["name"] for p in pods(cluster, namespace, "nodup"))
    assert names == ["nodup-0", "nodup-1", "nodup-2"]
    services = cluster.kubectl("get", "svc", "-n", namespace, "-l", "tabjob.dev/job-name=nodup", "-o", "name")
    assert services.stdout.split() == ["service/nodup"]


def test_suspend_deletes_pods_and_resume_finishes(cluster: Cluster, operator: Operator, namespace: str) -> None:
    cluster.apply(slow_job("pause"), namespace)
    wait_phase(cluster, namespace, "pause", "Running", timeout=120)
    cluster.kubectl("patch", "-n", namespace, "tabularjob/pause", "--type=merge", "-p",
                    '{"spec":{"runPolicy":{"suspend":true}}}')  # fmt: skip
    st = wait_condition(cluster, namespace, "pause", "Suspended", timeout=60)
    assert st["phase"] == "Suspended"
    cluster.wait_for("the pods to go", lambda: not pods(cluster, namespace, "pause"), timeout=60)
    cluster.kubectl("patch", "-n", namespace, "tabularjob/pause", "--type=merge", "-p",
                    '{"spec":{"runPolicy":{"suspend":false}}}')  # fmt: skip
    st = wait_condition(cluster, namespace, "pause", "Succeeded", timeout=420)
    assert condition(st, "Suspended")["status"] == "False"
    assert st["restarts"] == 0  # suspension is not a failure


def test_invalid_manifests_are_refused_or_marked_invalid_spec(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    # What CEL can check, the API server refuses.
    refused = cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(job("onefold", bagging={"folds": 1})), check=False
    )
    assert refused.returncode != 0 and "folds" in refused.stderr, refused.stderr
    # What needs the planner's arithmetic (a fit larger than the budget) becomes Failed/InvalidSpec, field named.
    cluster.apply(job("toobig", models={"GBM": [{"resources": {"cpus": 4}}]}), namespace)
    st = wait_condition(cluster, namespace, "toobig", "Stalled", timeout=60)
    assert st["phase"] == "Failed"
    assert condition(st, "Stalled")["reason"] == "InvalidSpec"
    assert "spec.models.GBM[0].resources.cpus" in condition(st, "Stalled")["message"]
    assert not pods(cluster, namespace, "toobig")


def test_deleting_a_job_removes_its_children(cluster: Cluster, operator: Operator, namespace: str) -> None:
    cluster.apply(slow_job("gone"), namespace)
    cluster.wait_for("pods", lambda: len(pods(cluster, namespace, "gone")) == 2, timeout=60)
    cluster.kubectl("delete", "-n", namespace, "tabularjob/gone", "--wait=true", "--timeout=60s")

    def nothing_left() -> bool:
        out = cluster.kubectl("get", "pods,svc,cm", "-n", namespace, "-l", "tabjob.dev/job-name=gone", "-o", "name")
        return not out.stdout.strip()

    cluster.wait_for("the children to be garbage-collected", nothing_left, timeout=90)


def test_ttl_after_finished_removes_the_job(cluster: Cluster, operator: Operator, namespace: str) -> None:
    cluster.apply(job("ttl", runPolicy={"ttlSecondsAfterFinished": 3}), namespace)
    started = time.monotonic()

    def gone() -> bool:
        proc = cluster.kubectl("get", "-n", namespace, "tabularjob/ttl", check=False)
        return proc.returncode != 0 and "NotFound" in proc.stderr

    cluster.wait_for("the finished job to be deleted", gone, timeout=240)
    assert time.monotonic() - started > 3


# ------------------------------------------------------------------ what only a real API server tells


def test_a_name_the_api_server_refuses_for_a_child_fails_the_job_not_the_operator(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    # "1abc" is a valid TabularJob name but not a valid Service name (DNS-1035 starts with a letter). Either the
    # API server refuses the job itself, or the operator records the refusal of its Service: never a silent stall.
    applied = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(job("1abc")), check=False)
    if applied.returncode != 0:
        assert "name" in applied.stderr, applied.stderr
        return
    st = wait_condition(cluster, namespace, "1abc", "Failed", timeout=60)
    failed = condition(st, "Failed")
    assert failed["reason"] == "CreateRejected" and "Service" in failed["message"], failed
    events = cluster.kubectl("get", "events", "-n", namespace, "--field-selector=reason=CreateRejected", "-o", "name")
    assert events.stdout.strip()
    assert not pods(cluster, namespace, "1abc")


def test_a_spec_edited_while_suspended_is_applied_whole_on_resume(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    cluster.apply(slow_job("edit"), namespace)
    wait_phase(cluster, namespace, "edit", "Running", timeout=120)
    assert _plan_world_size(cluster, namespace, "edit") == 2
    # Suspend, edit, resume (what the CEL message recommends): three pods instead of two.
    cluster.kubectl("patch", "-n", namespace, "tabularjob/edit", "--type=merge", "-p",
                    '{"spec":{"runPolicy":{"suspend":true}}}')  # fmt: skip
    wait_condition(cluster, namespace, "edit", "Suspended", timeout=60)
    cluster.wait_for("the pods to go", lambda: not pods(cluster, namespace, "edit"), timeout=60)
    three = '{"spec":{"resources":{"cpus":3,"cpusPerPod":1,"memory":"6Gi"},"bagging":{"folds":3}}}'
    cluster.kubectl("patch", "-n", namespace, "tabularjob/edit", "--type=merge", "-p", three)
    cluster.kubectl("patch", "-n", namespace, "tabularjob/edit", "--type=merge", "-p",
                    '{"spec":{"runPolicy":{"suspend":false}}}')  # fmt: skip
    cluster.wait_for("three pods", lambda: len(pods(cluster, namespace, "edit")) == 3, timeout=90)
    assert _plan_world_size(cluster, namespace, "edit") == 3  # the mounted plan agrees with the pods
    for pod in pods(cluster, namespace, "edit"):
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["WORLD_SIZE"] == "3"
    st = wait_condition(cluster, namespace, "edit", "Succeeded", timeout=420)
    assert st["observedGeneration"] == get(cluster, namespace, "edit")["metadata"]["generation"]


def _plan_world_size(cluster: Cluster, ns: str, name: str) -> int | None:
    proc = cluster.kubectl("get", "cm", "-n", ns, f"{name}-plan", "-o", "json", check=False)
    if proc.returncode != 0:
        return None
    return int(json.loads(json.loads(proc.stdout)["data"]["plan.json"])["worldSize"])


def test_a_recreated_job_waits_for_the_old_jobs_pods_instead_of_adopting_them(
    cluster: Cluster, operator: Operator, namespace: str
) -> None:
    cluster.apply(slow_job("again"), namespace)
    wait_phase(cluster, namespace, "again", "Running", timeout=120)
    old_uid = get(cluster, namespace, "again")["metadata"]["uid"]
    # Orphaned pods keep running with no owner; a new job of the same name must not take them for its own.
    cluster.kubectl("delete", "-n", namespace, "tabularjob/again", "--cascade=orphan", "--wait=true")
    cluster.apply(job("again"), namespace)
    st = wait_condition(cluster, namespace, "again", "Stalled", timeout=60)
    assert condition(st, "Stalled")["reason"] == "NameTaken", st
    assert all(not p["metadata"].get("ownerReferences") for p in pods(cluster, namespace, "again"))
    # Its children (pods, plan ConfigMap, Service) cleared away, the new job starts on its own.
    cluster.kubectl("delete", "pods,cm,svc", "-n", namespace, "-l", "tabjob.dev/job-name=again", "--wait=true")
    st = wait_condition(cluster, namespace, "again", "Succeeded", timeout=420)
    owners = {r["uid"] for p in pods(cluster, namespace, "again") for r in p["metadata"]["ownerReferences"]}
    assert owners == {get(cluster, namespace, "again")["metadata"]["uid"]} != {old_uid}


class ElectedOperator(Operator):
    """`tabjob operator --leader-elect` on one namespace, its Lease in that namespace."""

    def __init__(self, cluster: Cluster, log: Path, namespace: str) -> None:
        super().__init__(cluster, log)
        self.namespace = namespace

    def start(self) -> None:
        self.health_port, self.metrics_port = _free_port(), _free_port()
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        argv = [
            str(REPO / ".venv" / "bin" / "tabjob"), "operator", "--namespace", self.namespace,
            "--leader-elect", "--lease-namespace", self.namespace, "--lease-name", "tabjob-e2e",
            "--metrics-port", str(self.metrics_port), "--health-port", str(self.health_port),
        ]  # fmt: skip
        self.proc = spawn(argv, log=self.log, env=env, cwd=REPO)  # ends with this session, even on SIGTERM

    def leading(self) -> bool:
        try:
            return "tabjob_leader 1.0" in self.metrics()
        except OSError:
            return False


def test_leader_failover(cluster: Cluster, operator: Operator, namespace: str, tmp_path: Path) -> None:
    """Two replicas, the leader killed (SIGKILL) or stopped (SIGTERM): time until the other one reconciles."""
    operator.kill(signal.SIGTERM)  # the session's operator would reconcile this namespace too
    replicas = [ElectedOperator(cluster, tmp_path / f"op{i}.log", namespace) for i in range(2)]
    figures: list[tuple[str, float]] = []
    try:
        for r in replicas:
            r.start()
        for round_, sig in enumerate([signal.SIGKILL, signal.SIGKILL, signal.SIGKILL, signal.SIGTERM, signal.SIGTERM]):
            leader = cluster.wait_for("a leader", lambda: next((r for r in replicas if r.leading()), None), 60)
            standby = next(r for r in replicas if r is not leader)

            def serving(s: ElectedOperator = standby) -> bool:
                return not s.leading() and _up(s)

            cluster.wait_for("the standby serving metrics", serving, 60)
            killed = time.monotonic()
            leader.kill(sig)
            name = f"after-{round_}"
            cluster.apply(job(name, runPolicy={"suspend": True}), namespace)

            def reconciled(n: str = name) -> Any:
                return status(cluster, namespace, n).get("phase")

            cluster.wait_for(f"{name} reconciled", reconciled, 90)
            figures.append((signal.Signals(sig).name, time.monotonic() - killed))
            leader.start()  # back as the standby
        log = "\n".join(f"{sig} {seconds:.1f}" for sig, seconds in figures)
        print(f"failover seconds (signal, kill -> next reconcile):\n{log}")
        (REPO / "bench" / "results").mkdir(exist_ok=True)
        (REPO / "bench" / "results" / "failover.log").write_text(log + "\n")
        lease = json.loads(cluster.kubectl("get", "lease", "-n", namespace, "tabjob-e2e", "-o", "json").stdout)
        assert lease["spec"]["leaseTransitions"] >= len(figures)
        # SIGKILL: the Lease runs out (15 s) plus at most a retry period and the pass; SIGTERM: handed over at once.
        assert all(s < 15 + 2 + 8 for sig, s in figures if sig == "SIGKILL"), figures
        assert all(s < 2 + 8 for sig, s in figures if sig == "SIGTERM"), figures
    finally:
        for r in replicas:
            r.kill(signal.SIGTERM)
        operator.start()


def _up(op: Operator) -> bool:
    try:
        op.metrics()
    except OSError:
        return False
    return True
