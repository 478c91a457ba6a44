"""The progress stream the CLI's bar and the operator's status read: progress.jsonl and rank 0's endpoint."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest
from pydantic import ValidationError

from tabjob.contracts.plan import FitPlan
from tabjob.contracts.results import FitEvent, FitState, ProgressSnapshot, read_events
from tabjob_trainer.progress import Progress
from tabjob_trainer.record import FitRecord


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fit(fit_id: str, state: FitState, **outcome: object) -> FitRecord:
    model = fit_id.split(".", 1)[0]
    plan = FitPlan(
        id=fit_id, model=model, key=model, order=0, trial=0, bag_set=0, fold=0, cpus=1, gpus=0.0, processes=1,
        rank=0, ranks=[0], device="cpu", slot=0,
    )  # fmt: skip
    return FitRecord.planned(plan, state, **outcome)


def test_events_counts_and_the_http_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = _free_port()
    monkeypatch.setenv("TABJOB_PROGRESS_PORT", str(port))
    monkeypatch.setenv("POD_IP", "127.0.0.1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    progress = Progress(tmp_path, rank=0, total=4)
    progress.serve()
    progress.fit_started("GBM.t0.s0.f0", "GBM")
    progress.fit_ended(_fit("GBM.t0.s0.f0", "Succeeded", score_val=0.91, fit_time=1.5))
    progress.fit_ended(_fit("GBM.t0.s0.f1", "Succeeded", score_val=0.95, fit_time=1.2))
    progress.fit_ended(_fit("NN_TORCH.t0.s0.f0", "Failed", message="boom"))
    progress.fit_resumed("NN_TORCH.t0.s0.f1", "NN_TORCH")

    kinds = [(e.event, e.state) for e in read_events(tmp_path)]
    assert kinds == [
        ("FitStarted", None),
        ("FitEnded", "Succeeded"),
        ("FitEnded", "Succeeded"),
        ("FitEnded", "Failed"),
        ("FitResumed", None),
    ]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/progress", timeout=5) as resp:
        text = resp.read()
    progress.close()
    # What the operator's reconciler reads into status.progress: the typed contract, one spelling.
    snapshot = ProgressSnapshot.model_validate_json(text)
    assert snapshot == ProgressSnapshot(fits_total=4, fits_done=3, fits_failed=1, best_score=0.95, best_model="GBM")
    assert json.loads(text)["fitsTotal"] == 4


def test_a_half_written_line_waits_and_a_malformed_one_is_refused(tmp_path: Path) -> None:
    whole = FitEvent(t=1.0, event="FitStarted", rank=0, fit="a", model="GBM")
    (tmp_path / "progress.jsonl").write_bytes(whole.line() + b'{"t": 2.0, "event": "FitEn')
    assert read_events(tmp_path) == [whole]
    # A whole line that is no FitEvent is an error, not something a reader skips: one spelling, one model.
    (tmp_path / "progress.jsonl").write_text('{"t": 1.0, "event": "fit_done", "rank": 0, "fit": "a"}\n')
    with pytest.raises(ValidationError):
        read_events(tmp_path)
    with pytest.raises(ValidationError, match="carries the fit's state"):
        FitEvent(t=1.0, event="FitEnded", rank=0, fit="a")


def test_every_rank_serves_its_metrics_on_its_own_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = _free_port()
    monkeypatch.setenv("TABJOB_METRICS_PORT", str(base - 1))
    monkeypatch.setenv("LOCAL_RANK", "1")  # the second rank in its pod: the next port after the pod's first
    monkeypatch.setenv("POD_IP", "127.0.0.1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    progress = Progress(tmp_path, rank=3, total=2)
    try:
        progress.fit_ended(_fit("GBM.t0.s0.f1", "Succeeded", score_val=0.9, fit_time=2.0))
        with urllib.request.urlopen(f"http://127.0.0.1:{base}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    finally:
        progress.close()
    assert 'tabjob_trainer_fits_total{state="Succeeded"} 1.0' in text
    assert "tabjob_trainer_fit_seconds_count 1.0" in text


def test_each_event_is_also_a_line_of_the_log(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A trainer pod's log (kubectl logs) is its standard output: it shows the same events, one JSON line each."""
    progress = Progress(tmp_path, rank=1, total=2)
    progress.fit_started("GBM.t0.s0.f0", "GBM")
    progress.fit_ended(_fit("GBM.t0.s0.f0", "Succeeded", score_val=0.9, fit_time=0.5))
    progress.close()
    logged = [FitEvent.model_validate_json(line) for line in capfd.readouterr().out.splitlines()]
    assert logged == read_events(tmp_path)
    assert [(e.event, e.rank) for e in logged] == [("FitStarted", 1), ("FitEnded", 1)]
