"""Results a user can trust: resume reuses a fit only when nothing it depends on changed, a diverged fit fails
with its reason, rank 0 alone writes the termination message, a broken fit record is refit, and the time limit
is one deadline for the whole run, counted from the moment the data is loaded."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tabjob.api import load_manifest, to_manifest
from tabjob.cli.run import torchrun_command
from tabjob.contracts.results import RunSummary
from tests.trainer.helpers import events, leaderboard, manifest, mixed_table, plan_of, records, tabjob, write_manifest

pytestmark = pytest.mark.slow


def _in_pod(
    tmp: Path, doc: dict[str, Any], out: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """What an operator pod runs: the trainer entry on spec and plan files, without the CLI's plan check."""
    job_file = write_manifest(tmp, doc)
    plan = plan_of(job_file)
    inputs = tmp / "inputs"
    inputs.mkdir(exist_ok=True)
    (inputs / "spec.json").write_text(json.dumps(to_manifest(load_manifest(job_file))))
    (inputs / "plan.json").write_text(plan.to_json())
    command = torchrun_command(out, plan)
    command[command.index("--spec") + 1] = str(inputs / "spec.json")
    command[command.index("--plan") + 1] = str(inputs / "plan.json")
    clean = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=600, env={**clean, **(env or {})}, check=False
    )


def _gbm(rounds: int) -> dict[str, Any]:
    return {"GBM": [{"hyperparameters": {"num_boost_round": rounds, "early_stopping_rounds": 1000}}]}


def test_in_pod_resume_refits_when_hyperparameters_change(tmp_path: Path) -> None:
    mixed_table(300, seed=7).to_csv(tmp_path / "train.csv", index=False)
    out = tmp_path / "out"
    first = _in_pod(tmp_path, manifest(str(tmp_path / "train.csv"), "label", _gbm(2), bagging={"folds": 2}), out)
    assert first.returncode == 0, first.stderr
    assert {r.best_iteration for r in records(out).values()} == {2}
    # Same output volume, the config changed: the old fits and score must not be reported as the new ones.
    second = _in_pod(tmp_path, manifest(str(tmp_path / "train.csv"), "label", _gbm(300), bagging={"folds": 2}), out)
    assert second.returncode == 0, second.stderr
    assert all((r.best_iteration or 0) > 2 for r in records(out).values())
    assert not [e for e in events(out) if e.event == "FitResumed"]
    row = next(r for r in leaderboard(out) if r["model"] == "GBM")
    # First on the row; the way each fold kept its string column follows (LightGBM compares ways).
    assert row["note"].startswith("refit: hyperparameters changed since the stored fit; string columns")
    # And an unchanged rerun reuses every fit.
    third = _in_pod(tmp_path, manifest(str(tmp_path / "train.csv"), "label", _gbm(300), bagging={"folds": 2}), out)
    assert third.returncode == 0, third.stderr
    assert len([e for e in events(out) if e.event == "FitResumed"]) == 2


def test_cli_rerun_with_other_data_refits_instead_of_crashing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    doc = manifest("sklearn://diabetes", "target", _gbm(20), bagging={"folds": 3}, ensemble={"size": 0})
    first = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert first.returncode == 0, first.stderr
    before = leaderboard(out)[0]["score_val"]
    # Same plan, another row count: this crashed in bagging.combine (IndexError) and left the folder half-written.
    doc["spec"]["data"]["train"] = "sklearn://diabetes?split=train"
    second = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    assert second.returncode == 0, second.stderr
    row = leaderboard(out)[0]
    assert row["note"] == "refit: data (rows, columns or labels) changed since the stored fit"
    assert row["score_val"] != before
    assert json.loads((out / "preprocessing.json").read_text())["data"]["rows"] == 353


def test_diverged_fit_fails_with_its_reason_and_never_reaches_the_summary(tmp_path: Path) -> None:
    models = {
        "GBM": [{"hyperparameters": {"num_boost_round": 20}}],
        "NN_TORCH": [{"hyperparameters": {"learning_rate": 1e30, "num_epochs": 3, "hidden_size": 8}}],
    }
    doc = manifest("sklearn://diabetes", "target", models, bagging={"folds": 2})
    out, message = tmp_path / "out", tmp_path / "termination-log"
    job = str(write_manifest(tmp_path, doc))
    for _ in range(2):  # the second run resumes over the failed fits: it crashed before
        result = tabjob("run", job, "--output-dir", str(out), "--quiet", env={"TABJOB_TERMINATION_LOG": str(message)})
        assert result.returncode == 0, result.stderr
        rows = {r["model"]: r for r in leaderboard(out)}
        assert rows["NN_TORCH"]["state"] == "Failed" and rows["NN_TORCH"]["score_val"] is None
        assert "NonFiniteError" in rows["NN_TORCH"]["note"] and "NaN or infinite" in rows["NN_TORCH"]["note"]
        assert rows["WeightedEnsemble"]["weights"] == {"GBM": 1.0}
        summary = RunSummary.model_validate_json(message.read_text())  # refuses NaN, as the API server does
        assert summary.best_model in ("GBM", "WeightedEnsemble") and summary.fits_failed == 2
        failed = next(m for m in summary.models if m.name == "NN_TORCH")
        assert failed.state == "Failed" and failed.reason and "NaN" in failed.reason


def test_only_rank_zero_writes_the_termination_message(tmp_path: Path) -> None:
    mixed_table(300, seed=8).to_csv(tmp_path / "train.csv", index=False)
    doc = manifest(
        str(tmp_path / "train.csv"), "label", _gbm(10), resources={"cpus": 2, "cpusPerPod": 1}, bagging={"folds": 2}
    )
    message = tmp_path / "termination-log"
    out = tmp_path / "out"
    result = _in_pod(tmp_path, doc, out, env={"TABJOB_TERMINATION_LOG": str(message)})
    assert result.returncode == 0, result.stderr
    summary = RunSummary.model_validate_json(message.read_text())
    assert summary.best_model and summary.fits_done == 2 and summary.models

    # Rank 0 crashes while writing results (oof/ is a file), after rank 1 finished: the file stays empty so the
    # kubelet shows rank 0's log tail (FallbackToLogsOnError) instead of rank 1's {"rank": 1}.
    message.unlink()
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    (crashed / "oof").write_text("in the way")
    result = _in_pod(tmp_path, doc, crashed, env={"TABJOB_TERMINATION_LOG": str(message)})
    assert result.returncode != 0
    assert not message.exists() or message.read_text() == ""


def test_an_empty_fit_record_is_refit_not_a_crash(tmp_path: Path) -> None:
    mixed_table(300, seed=9).to_csv(tmp_path / "train.csv", index=False)
    doc = manifest(str(tmp_path / "train.csv"), "label", _gbm(10), bagging={"folds": 2})
    job, out = str(write_manifest(tmp_path, doc)), tmp_path / "out"
    assert tabjob("run", job, "--output-dir", str(out), "--quiet").returncode == 0
    (out / "fits" / "GBM.t0.s0.f1" / "result.json").write_text("")  # what a node crash without fsync left
    result = tabjob("run", job, "--output-dir", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    second = events(out)
    assert {e.fit for e in second if e.event == "FitStarted"} == {"GBM.t0.s0.f1"}
    assert {e.fit for e in second if e.event == "FitResumed"} == {"GBM.t0.s0.f0"}


def test_the_time_limit_is_one_deadline_for_the_run(tmp_path: Path) -> None:
    from tabjob_trainer.job import RUN_FILE, run_deadline

    doc = manifest("x.csv", "y", _gbm(10), timeLimitSeconds=60)
    plan = plan_of(write_manifest(tmp_path, doc))
    first = run_deadline(tmp_path, plan, "data-a", started=1000.0)
    assert first == 1060.0 and json.loads((tmp_path / RUN_FILE).read_text())["deadline"] == 1060.0
    # A restarted attempt or a resume, later: the clock does not start again.
    assert run_deadline(tmp_path, plan, "data-a", started=5000.0) == 1060.0
    # Other inputs are another run, with a clock of its own.
    assert run_deadline(tmp_path, plan, "data-b", started=5000.0) == 5060.0
    (tmp_path / RUN_FILE).write_text("")  # unreadable: a new clock rather than a crash
    assert run_deadline(tmp_path, plan, "data-b", started=7000.0) == 7060.0


def test_the_time_limit_starts_once_the_data_is_loaded(tmp_path: Path) -> None:
    """Reading the data does not spend the fits' budget: the run's clock starts after the last rows arrived.

    The training table comes over HTTP (fsspec, as from object storage) from a server in this test that sends half
    of it, takes its time, notes the moment and sends the rest: no read of it can end before that moment, so a clock
    started before the data was loaded shows as a start before it.
    """
    from tabjob_trainer.job import RUN_FILE

    body = mixed_table(300, seed=11).to_csv(index=False).encode()
    last_rows_at: list[float] = []

    class SlowStorage(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # no length: the client streams the body to its end

        def _head(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/csv")
            self.end_headers()

        def do_HEAD(self) -> None:
            self._head()

        def do_GET(self) -> None:
            self._head()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            time.sleep(2.0)
            last_rows_at.append(time.time())  # before the last rows: a read of this response ends after it
            with contextlib.suppress(OSError):  # a client that only wanted the headers has gone
                self.wfile.write(body[len(body) // 2 :])

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowStorage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/train.csv"
        doc = manifest(url, "label", _gbm(10), timeLimitSeconds=600)
        out = tmp_path / "out"
        result = tabjob("run", str(write_manifest(tmp_path, doc)), "--output-dir", str(out), "--quiet")
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr
    clock = json.loads((out / RUN_FILE).read_text())
    # The earliest such moment is before the end of every read of the table, the trainer's included.
    assert last_rows_at and clock["startedAt"] > min(last_rows_at), (clock, last_rows_at)
    assert clock["deadline"] == clock["startedAt"] + 600
