"""A killed run resumes: finished fits are loaded, not fitted again; half-written ones never count."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tabjob.api import load_manifest, to_manifest
from tabjob.cli.run import torchrun_command
from tests.trainer.helpers import events, leaderboard, manifest, mixed_table, plan_of, tabjob, write_manifest

pytestmark = pytest.mark.slow


def _done(out: Path) -> list[str]:
    path = out / "progress.jsonl"
    if not path.exists():
        return []
    return [str(e.fit) for e in events(out) if e.event == "FitEnded" and e.state == "Succeeded"]


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text() if (task / "children").exists() else ""
        kids += [int(k) for k in text.split()]
    return kids


def _kill_tree(pid: int) -> None:
    """SIGKILL torchrun and its workers at once (torchrun starts each worker in a session of its own)."""
    victims = [pid]
    for p in victims:
        victims.extend(_children(p))
    for p in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


def test_killed_run_resumes_without_refitting(tmp_path: Path) -> None:
    mixed_table(600, seed=4).to_csv(tmp_path / "train.csv", index=False)
    nn = {"num_epochs": 25, "patience": 25, "hidden_size": 64}
    doc = manifest(
        str(tmp_path / "train.csv"),
        "label",
        {"GBM": [{"hyperparameters": {"num_boost_round": 40}}], "NN_TORCH": [{"hyperparameters": nn}]},
        resources={"cpus": 2, "cpusPerPod": 1},
        bagging={"folds": 4},
    )
    job_file = write_manifest(tmp_path, doc)
    plan = plan_of(job_file)
    out = tmp_path / "run"
    out.mkdir()
    (out / "spec.json").write_text(json.dumps(to_manifest(load_manifest(job_file))))
    (out / "plan.json").write_text(plan.to_json())

    # The pod-restart case: the whole torchrun group dies at once, mid-way through the NN folds.
    proc = subprocess.Popen(
        torchrun_command(out, plan), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.time() + 180
        while len(_done(out)) < 5 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
    finally:
        _kill_tree(proc.pid)
        proc.wait()
    assert not (out / "leaderboard.json").exists(), "the run finished before it could be killed"
    # A fit killed between writing its files and renaming its staging directory leaves `.tmp-<id>/result.json`:
    # not finished, so the next run fits it again (and clears the staging directory, checked below).
    finished = {
        p.parent.name: p.stat().st_mtime_ns
        for p in (out / "fits").glob("*/result.json")
        if not p.parent.name.startswith(".tmp-")
    }
    assert len(finished) >= 5 and len(finished) < len(plan.fits)

    result = tabjob("run", str(job_file), "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    second = events(out)
    resumed = {e.fit for e in second if e.event == "FitResumed"}
    started = {e.fit for e in second if e.event == "FitStarted"}
    assert resumed == set(finished)
    assert not started & set(finished)
    assert started | resumed == {f.id for f in plan.fits}
    # Not rewritten either: the finished fits' files are the ones the killed run wrote.
    assert all((out / "fits" / fid / "result.json").stat().st_mtime_ns == t for fid, t in finished.items())
    assert not [p for p in (out / "fits").iterdir() if p.name.startswith(".tmp-")]
    assert {r["model"] for r in leaderboard(out)} == {"GBM", "NN_TORCH", "WeightedEnsemble"}
