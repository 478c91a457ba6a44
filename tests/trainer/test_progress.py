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
