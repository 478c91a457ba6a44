"""A finished multi-rank job exits 0 on every rank, every time.

The failure this guards against was intermittent: rank 1 aborted ("terminate called without an active
exception", SIGABRT) after the job was done, because the default gloo process group outlived
``destroy_process_group``: torch.distributed.nn, imported lazily by torch's optimizers after the group existed,
binds ``group.WORLD`` as a default argument and so keeps the group alive. Its worker threads then ran into
interpreter shutdown, and one that dropped the last reference to a finished gather's tensors tried to take the
GIL while Python was finalizing. The first test checks the cause without luck: after ``Dist.close`` no gloo
thread is left. The second runs a real two-rank job many times and wants every exit to be 0.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.helpers import leaderboard, manifest, mixed_table, tabjob, write_manifest

pytestmark = pytest.mark.slow

_RANK_SCRIPT = """
import os, sys
from pathlib import Path
from tabjob_trainer.job import Dist

def gloo_threads():
    names = [Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in os.listdir("/proc/self/task")]
    return sorted(n for n in names if "gloo" in n)

rank = int(os.environ["RANK"])
comm = Dist(rank, 2, timeout_s=120)
import torch
torch.optim.AdamW(torch.nn.Linear(2, 1).parameters())  # what every NN_TORCH fit does first
comm.gather_to_zero(Path(sys.argv[1]), [])
comm.close()
left = gloo_threads()
print(f"rank {rank} gloo threads after close: {left}", flush=True)
sys.exit(3 if left else 0)
"""


def test_no_process_group_thread_survives_close(tmp_path: Path) -> None:
    script = tmp_path / "ranks.py"
    script.write_text(_RANK_SCRIPT)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    result = subprocess.run(
        [*launcher, str(script), str(tmp_path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert result.stdout.count("gloo threads after close: []") == 2, result.stdout


RUNS = 10


def test_two_rank_job_exits_zero_every_time(tmp_path: Path) -> None:
    mixed_table(300, seed=5).to_csv(tmp_path / "train.csv", index=False)
    doc = manifest(
        str(tmp_path / "train.csv"),
        "label",
        {
            "GBM": [{"hyperparameters": {"num_boost_round": 10}}],
            "NN_TORCH": [{"hyperparameters": {"num_epochs": 2, "hidden_size": 8}}],
        },
        resources={"cpus": 2, "cpusPerPod": 1},
        bagging={"folds": 2},
    )
    job = write_manifest(tmp_path, doc)
    failures = []
    for i in range(RUNS):
        out = tmp_path / f"run{i}"
        result = tabjob("run", str(job), "--output-dir", str(out), "--quiet")
        if result.returncode != 0:
            log = (out / "trainer.log").read_text() if (out / "trainer.log").exists() else ""
            failures.append(f"run {i}: exit {result.returncode}: {result.stderr.strip()[:300]} {log[-600:]}")
        else:
            assert leaderboard(out)[0]["state"] == "Succeeded"
    assert not failures, "\n".join(failures)
