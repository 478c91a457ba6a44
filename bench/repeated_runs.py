"""Several runs of the same code in one setting, read together: each table's mean test score against its peer.

One run per table decides a table by a test row or two on the small tables (digits moved by two rows of 450
between two runs of one trainer), so a count by the point score taken from one run is partly a coin toss. Here
every run of one trainer is laid side by side, and a table counts as at or above AutoGluon (or the default
LightGBM) where the mean of its runs is. AutoGluon's side is the one run every tabjob run was scored against
(``--peer-from``), so the mean only takes tabjob's noise out, not AutoGluon's.
"""

from __future__ import annotations

import json
from typing import Any

from bench.common import RESULTS
from bench.sections import score_text

Run = tuple[str, ...]  # one run: the results files it wrote (a group's tables may take two files)

# (title, the runs of one trainer code, first run first)
REPEATS: list[tuple[str, tuple[Run, ...]]] = [
    (
        "Same families at the current code, every run of it read together",
        (("autogluon_peer_same_head",), ("autogluon_peer_same_head_again",), ("autogluon_peer_same_rerun",)),
    ),
    (
        "Unseen tables, same families, at the current code: both runs read together",
        (
            ("autogluon_peer_same_unseen_head", "autogluon_peer_same_wider_head"),
            ("autogluon_peer_same_unseen_rerun", "autogluon_peer_same_wider_rerun"),
        ),
    ),
]


Entries = list[tuple[Run, dict[str, Any]]]  # a table's entries in run order, each with its run


def _runs(runs: tuple[Run, ...]) -> dict[str, Entries]:
    """Each table's entries in run order; files not measured yet are left out."""
    tables: dict[str, Entries] = {}
    for run in runs:
        for name in run:
            path = RESULTS / f"{name}.json"
            if path.exists():
                for table, entry in json.loads(path.read_text())["datasets"].items():
                    tables.setdefault(table, []).append((run, entry))
    return tables


def _files(runs: tuple[Run, ...]) -> list[str]:
    """The results files read, in run order."""
    return [name for run in runs for name in run if (RESULTS / f"{name}.json").exists()]


def _peer(entries: Entries) -> float:
    """AutoGluon's test score, checked to be the same run's in every entry (else a mean would mix two peers)."""
    scores = {round(e["autogluon"]["test"], 12) for _, e in entries}
    if len(scores) != 1:
        raise ValueError(f"runs read together were scored against different AutoGluon runs: {sorted(scores)}")
    return entries[0][1]["autogluon"]["test"]


def _per_run_counts(tables: dict[str, Entries], runs: tuple[Run, ...]) -> list[str]:
    """Each run that covered every table: its own counts at or above AutoGluon and the default LightGBM by the
    point."""
    out = []
    for run in runs:
        found = [next((e for r, e in es if r == run), None) for es in tables.values()]
        entries = [e for e in found if e is not None]
        if len(entries) == len(found):
            met = sum(1 for e in entries if e["score_met"])
            floor = sum(1 for e in entries if e["not_below_default_lightgbm"])
            out.append(f"{' + '.join(f'`{n}`' for n in run)} {met} and {floor} of {len(entries)}")
    return out


def section(title: str, runs: tuple[Run, ...]) -> list[str]:
    tables = _runs(runs)
    if not tables:
        return [f"### {title}", "", "Not measured yet.", ""]
    out = [
        f"### {title}",
        "",
        f"The runs {', '.join(f'`{n}`' for n in _files(runs))} "
        "(their sections above or below give each one's command, loads and bootstrap), the same trainer code in "
        "each. A table is at or above a side where the mean of its runs is.",
        "",
        "| dataset | metric | tabjob runs (first first) | tabjob mean | AutoGluon | default LightGBM | runs at or "
        "above AutoGluon | mean at or above AutoGluon | mean at or above the default LightGBM | bootstrap verdicts |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    above_peer = above_floor = losses = 0
    yes = {True: "yes", False: "**no**"}
    for table, entries in sorted(tables.items()):
        scores = [e["tabjob"]["test"] for _, e in entries]
        mean = sum(scores) / len(scores)
        peer, floor = _peer(entries), entries[0][1]["default_lightgbm_test"]
        met = sum(1 for _, e in entries if e["score_met"])
        verdicts = [e["bootstrap"]["verdict"] for _, e in entries]
        above_peer += mean >= peer
        above_floor += mean >= floor
        losses += "loss" in verdicts
        out.append(
            f"| {table} | {entries[0][1]['metric']} | {', '.join(score_text(s) for s in scores)} | "
            f"{score_text(mean)} | {score_text(peer)} | {score_text(floor)} | {met} of {len(entries)} | "
            f"{yes[mean >= peer]} | {yes[mean >= floor]} | "
            f"{', '.join(verdicts)} |"
        )
    n = len(tables)
    counts = _per_run_counts(tables, runs)
    each = f" Each run's own counts (AutoGluon, the default LightGBM): {'; '.join(counts)}." if counts else ""
    out += [
        "",
        f"By the mean of the runs: at or above AutoGluon on **{above_peer} of {n}**, at or above the default "
        f"LightGBM on **{above_floor} of {n}**; a loss by the bootstrap in any run on **{losses} of {n}**.{each}",
        "",
    ]
    return out


def render() -> list[str]:
    return [line for title, runs in REPEATS for line in section(title, runs)]
