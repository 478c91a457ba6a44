"""BENCHMARKS.md's generated sections are what their renderers make of the recorded results: a figure edited by
hand, or a result recorded without rendering, fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import (
    rank_busy,
    render_arithmetic,
    render_autogluon_peer,
    render_floor,
    render_kueue,
    render_operator,
    render_scoring,
    render_serving,
    render_sharded,
    render_storage,
    render_tree_categories,
    render_tree_patience,
)

DOC = Path(__file__).resolve().parents[2] / "BENCHMARKS.md"


def _section(begin: str, end: str) -> str:
    text = DOC.read_text()
    assert begin in text and end in text, f"BENCHMARKS.md lacks its {begin!r} section"
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


@pytest.mark.parametrize(
    ("begin", "end", "render"),
    [
        (render_operator.BEGIN, render_operator.END, render_operator.render),
        (render_kueue.BEGIN, render_kueue.END, render_kueue.render),
        (render_serving.BEGIN, render_serving.END, render_serving.render),
        (render_storage.BEGIN, render_storage.END, render_storage.render),
        (render_scoring.BEGIN, render_scoring.END, render_scoring.render),
        (render_sharded.BEGIN, render_sharded.END, render_sharded.render),
        (render_autogluon_peer.BEGIN, render_autogluon_peer.END, render_autogluon_peer.render),
        (render_floor.MECHANISM_BEGIN, render_floor.MECHANISM_END, render_floor.mechanism_section),
        (render_floor.BEGIN, render_floor.END, render_floor.floor_section),
        (render_floor.HELDOUT_BEGIN, render_floor.HELDOUT_END, render_floor.heldout_section),
        (render_floor.FAMILIES_BEGIN, render_floor.FAMILIES_END, render_floor.families_section),
        (render_tree_categories.BEGIN, render_tree_categories.END, render_tree_categories.render),
        (render_tree_categories.GBM_BEGIN, render_tree_categories.GBM_END, render_tree_categories.gbm_render),
        (render_tree_patience.BEGIN, render_tree_patience.END, render_tree_patience.render),
        (render_arithmetic.BEGIN, render_arithmetic.END, render_arithmetic.render),
        (rank_busy.BEGIN, rank_busy.END, rank_busy.render),
    ],
    ids=[
        "operator",
        "kueue",
        "serving",
        "storage",
        "scoring",
        "sharded",
        "autogluon-peer",
        "floor-mechanism",
        "floor",
        "floor-heldout",
        "new-families",
        "xgb-categories",
        "gbm-categories",
        "tree-patience",
        "arithmetic-features",
        "rank-busy",
    ],
)
def test_section_is_its_rendering(begin: str, end: str, render: object) -> None:
    assert callable(render)
    assert _section(begin, end) == str(render()).strip("\n")
