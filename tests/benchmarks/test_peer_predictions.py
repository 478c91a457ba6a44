"""AutoGluon's test predictions kept beside the results, so that ``--peer-from`` bootstraps against them on a machine
whose /tmp never held that run (a new checkout, a CI machine) instead of failing or training AutoGluon again."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import autogluon_peer


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(autogluon_peer, "WORK", tmp_path / "work")
    monkeypatch.setattr(autogluon_peer, "PREDICTIONS", tmp_path / "kept")
    return tmp_path


def test_kept_predictions_come_back_byte_for_byte_where_the_bootstrap_reads_them(places: Path) -> None:
    here = places / "work" / "same" / "autogluon" / "mpg.preds.csv"
    here.parent.mkdir(parents=True)
    here.write_text("pred\n2.0312500000000004\n17.25\n")
    autogluon_peer.keep_predictions("run_a", "mpg", "same")
    kept = places / "kept" / "run_a" / "mpg.preds.csv.gz"
    assert kept.exists()
    first = kept.read_bytes()
    autogluon_peer.keep_predictions("run_a", "mpg", "same")
    assert kept.read_bytes() == first, "the same predictions keep as the same bytes (no timestamp in the gzip)"
    here.unlink()
    autogluon_peer.restore_predictions("run_a", "mpg", "same")
    assert here.read_text() == "pred\n2.0312500000000004\n17.25\n"


def test_a_run_with_no_predictions_anywhere_names_the_table_and_both_places(places: Path) -> None:
    with pytest.raises(SystemExit, match=r"--peer-from run_b: no AutoGluon predictions for mpg in .*kept.*run_b"):
        autogluon_peer.restore_predictions("run_b", "mpg", "same")
