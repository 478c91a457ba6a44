"""Charts of a finished run: the leaderboard, learning curves and feature importance, plus an index.html.

matplotlib with the Agg backend: no display needed; PNGs sized for a laptop screen.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tabjob.families import ERROR_METRICS, FAMILIES
from tabjob_trainer import store
from tabjob_trainer.record import FitRecord

_ENSEMBLE_COLOUR = "#264653"
_UNKNOWN_COLOUR = "#888888"  # a model that never finished has no family in models.json
_TOP_FEATURES = 20


def _key_of(model: str, index: dict[str, Any]) -> str:
    return str(index.get(model, {}).get("key", "ENSEMBLE" if model == "WeightedEnsemble" else ""))


def _colour(key: str) -> str:
    if key == "ENSEMBLE":
        return _ENSEMBLE_COLOUR
    return FAMILIES[key].colour if key in FAMILIES else _UNKNOWN_COLOUR


def leaderboard_chart(rows: list[dict[str, Any]], index: dict[str, Any], path: Path) -> None:
    scored = [r for r in rows if r.get("score_val") is not None]
    metric = scored[0]["eval_metric"] if scored else ""
    fig, ax = plt.subplots(figsize=(8, 0.5 * max(len(scored), 2) + 1.5))
    names = [r["model"] for r in scored][::-1]
    values = [r["score_val"] for r in scored][::-1]
    colours = [_colour(_key_of(n, index)) for n in names]
    bars = ax.barh(names, values, color=colours)
    if values:
        low, high = min(values), max(values)
        pad = (high - low) * 0.5 or abs(high) * 0.05 or 0.05
        ax.set_xlim(low - pad, high + pad * 0.6)
        for bar, v in zip(bars, values, strict=True):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {v:.4f}", va="center", fontsize=9)
    errors = " (errors negated: higher is better)" if metric in ERROR_METRICS else ""
    ax.set_xlabel(f"validation {metric}{errors}")
    ax.set_title("Leaderboard (best at the top)")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def learning_curves(records: dict[str, FitRecord], path: Path) -> bool:
    by_config: dict[str, list[FitRecord]] = defaultdict(list)
    for rec in records.values():
        if rec.succeeded and rec.curve.get("val"):
            by_config[rec.model].append(rec)
    if not by_config:
        return False
    configs = sorted(by_config)
    fig, axes = plt.subplots(1, len(configs), figsize=(5.5 * len(configs), 4), squeeze=False)
    for ax, config in zip(axes[0], configs, strict=True):
        recs = sorted(by_config[config], key=lambda r: r.id)
        for rec in recs:
            curve = rec.curve
            ax.plot(range(1, len(curve["val"]) + 1), curve["val"], lw=1.2, label=rec.id.split(".", 1)[1])
            if rec.best_iteration:
                ax.axvline(rec.best_iteration, color="#999999", lw=0.6, ls=":")
        metric = recs[0].curve.get("metric", "")
        key = recs[0].key
        unit = FAMILIES[key].curve_unit if key in FAMILIES else "step"
        ax.set_title(f"{config}: validation {metric}")
        ax.set_xlabel(unit)
        ax.set_ylabel(metric)
        ax.spines[["top", "right"]].set_visible(False)
        if len(recs) <= 10:
            ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _importance_by_family(records: dict[str, FitRecord]) -> dict[str, dict[str, float]]:
    """Per model family, each feature's importance summed over that family's fits."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for rec in records.values():
        if rec.succeeded:
            for name, value in rec.importance.items():
                totals[rec.key][name] += value
    return totals


def feature_importance(records: dict[str, FitRecord], path: Path) -> bool:
    """Per family, as it declares: share of split gain (GBM), or validation score lost when a column is shuffled."""
    families = {k: v for k, v in _importance_by_family(records).items() if v}
    if not families:
        return False
    keys = [k for k in FAMILIES if k in families]
    height = 0.32 * min(_TOP_FEATURES, max(len(families[k]) for k in keys)) + 1.5
    fig, axes = plt.subplots(1, len(keys), figsize=(7.5 * len(keys), height), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        values = families[key]
        top = sorted(values.items(), key=lambda kv: -kv[1])[:_TOP_FEATURES]
        if key in FAMILIES and FAMILIES[key].importance == "gain":
            whole = sum(values.values()) or 1.0
            bars = [100 * v / whole for _, v in top]
            ax.set_xlabel(f"share of total split gain over all {key} fits (%)")
        else:
            fits = sum(1 for r in records.values() if r.key == key and r.importance)
            bars = [v / max(fits, 1) for _, v in top]
            ax.set_xlabel("validation score lost when the column is shuffled (mean over fits)")
        ax.barh([n for n, _ in top][::-1], bars[::-1], color=_colour(key))
        ax.set_title(f"{key}: feature importance (top {len(top)} of {len(values)})")
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_report(run_dir: str | Path, output: str | Path | None = None) -> Path:
    run = Path(run_dir)
    target = Path(output) if output else run / "report"
    target.mkdir(parents=True, exist_ok=True)
    rows = json.loads((run / "leaderboard.json").read_text())
    index = json.loads((run / "models.json").read_text()) if (run / "models.json").exists() else {}
    records = store.records(run)
    images = []
    leaderboard_chart(rows, index, target / "leaderboard.png")
    images.append(("Leaderboard", "leaderboard.png"))
    if learning_curves(records, target / "learning_curves.png"):
        images.append(("Learning curves", "learning_curves.png"))
    if feature_importance(records, target / "feature_importance.png"):
        images.append(("Feature importance", "feature_importance.png"))
    (target / "index.html").write_text(_html(run, rows, images))
    return target


def _html(run: Path, rows: list[dict[str, Any]], images: list[tuple[str, str]]) -> str:
    cols = [
        c
        for c in (
            "model",
            "score_val",
            "score_test",
            "eval_metric",
            "fit_time",
            "pred_time_val",
            "device",
            "state",
            "note",
        )
        if any(c in r for r in rows)
    ]

    def cell(v: Any) -> str:
        return html.escape(f"{v:.4f}" if isinstance(v, float) else "" if v is None else str(v))

    table = "".join(f"<tr>{''.join(f'<td>{cell(r.get(c))}</td>' for c in cols)}</tr>" for r in rows)
    head = "".join(f"<th>{c}</th>" for c in cols)
    figs = "".join(f"<h2>{t}</h2><img src='{f}' alt='{t}'>" for t, f in images)
    return (
        "<!doctype html><meta charset='utf-8'><title>tabjob report</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
        "td,th{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left}img{max-width:100%}</style>"
        f"<h1>tabjob run: {html.escape(str(run))}</h1><table><tr>{head}</tr>{table}</table>{figs}"
    )
