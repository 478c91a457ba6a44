"""The progress stream the CLI's bar and the operator's status read: progress.jsonl and rank 0's endpoint."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest

from tabjob.results_model import ProgressSnapshot
from tabjob_trainer.progress import Progress, read_events


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_events_counts_and_the_http_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = _free_port()
    monkeypatch.setenv("TABJOB_PROGRESS_PORT", str(port))
    monkeypatch.setenv("POD_IP", "127.0.0.1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    progress = Progress(tmp_path, rank=0, total=4)
    progress.serve()
    progress.event("fit_start", fit="GBM.t0.s0.f0", model="GBM")
    progress.event("fit_done", fit="GBM.t0.s0.f0", model="GBM", score=0.91, seconds=1.5)
    progress.event("fit_done", fit="GBM.t0.s0.f1", model="GBM", score=0.95, seconds=1.2)
    progress.event("fit_failed", fit="NN_TORCH.t0.s0.f0", model="NN_TORCH", message="boom")
    progress.event("fit_resumed", fit="NN_TORCH.t0.s0.f1", model="NN_TORCH")

    kinds = [e["event"] for e in read_events(tmp_path)]
    assert kinds == ["fit_start", "fit_done", "fit_done", "fit_failed", "fit_resumed"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/progress", timeout=5) as resp:
        text = resp.read()
    progress.close()
    # What the operator's reconciler reads into status.progress: the typed contract, one spelling.
    snapshot = ProgressSnapshot.model_validate_json(text)
    assert snapshot == ProgressSnapshot(fits_total=4, fits_done=3, fits_failed=1, best_score=0.95, best_model="GBM")
    assert json.loads(text)["fitsTotal"] == 4


def test_a_half_written_line_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "progress.jsonl").write_text('{"event": "fit_done", "fit": "a"}\n{"event": "fit_do')
    assert read_events(tmp_path) == [{"event": "fit_done", "fit": "a"}]


def test_every_rank_serves_its_metrics_on_its_own_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = _free_port()
    monkeypatch.setenv("TABJOB_METRICS_PORT", str(base - 1))
    monkeypatch.setenv("LOCAL_RANK", "1")  # the second rank in its pod: the next port after the pod's first
    monkeypatch.setenv("POD_IP", "127.0.0.1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    progress = Progress(tmp_path, rank=3, total=2)
    try:
        progress.event("fit_done", fit="GBM.t0.s0.f1", model="GBM", score=0.9, seconds=2.0)
        with urllib.request.urlopen(f"http://127.0.0.1:{base}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    finally:
        progress.close()
    assert 'tabjob_trainer_fits_total{state="done"} 1.0' in text
    assert "tabjob_trainer_fit_seconds_count 1.0" in text


def test_each_event_is_also_a_line_of_the_log(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A trainer pod's log (kubectl logs) is its standard output: it shows the same events, one JSON line each."""
    progress = Progress(tmp_path, rank=1, total=2)
    progress.event("fit_start", fit="GBM.t0.s0.f0", model="GBM")
    progress.event("fit_done", fit="GBM.t0.s0.f0", model="GBM", score=0.9, seconds=0.5)
    progress.close()
    logged = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert logged == read_events(tmp_path)
    assert [(e["event"], e["rank"]) for e in logged] == [("fit_start", 1), ("fit_done", 1)]
