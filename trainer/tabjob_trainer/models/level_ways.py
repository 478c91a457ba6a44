"""The ways a tree fit tries its string columns (as sets of levels, as ordinal codes, by a level limit), and the one it
keeps: LightGBM's (models/gbm.py) and XGBoost's (models/xgb.py) fits train each way the config asks for and keep the
one with the best stopping metric on the fold's validation rows, and their leaderboard rows say which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Way:
    """One way of training the string columns: its ``max_native_levels``, booster, curve, kept round's score and
    the seconds it trained."""

    limit: int
    booster: Any
    evals: dict[str, Any]
    value: float
    seconds: float

    def better_than(self, other: Way, higher_is_better: bool) -> bool:
        """Strictly: on a tie the way tried first, the config's own, is kept."""
        return self.value > other.value if higher_is_better else self.value < other.value


def what_was_kept(limits: list[int], kept: int, cardinalities: list[int]) -> tuple[str | None, dict[str, Any]]:
    """The leaderboard's note and the record's ``settings_chosen`` (its refit trains the folds' majority) for the
    way a fit kept; neither where it tried one way."""
    if len(limits) < 2:
        return None, {}
    return kept_note(limits, kept, cardinalities), {"max_native_levels": kept}


def kept_seconds(limits: list[int], kept: Way) -> float | None:
    """``Trained.kept_seconds``: the kept way's own training time where the fit tried several (its fit time counts
    them all, and a refit, which trains one way, is estimated from this); None where it tried one."""
    return round(kept.seconds, 4) if len(limits) >= 2 else None


def kept_note(limits: list[int], kept: int, cardinalities: list[int]) -> str:
    """The leaderboard's word on the way a fit kept; short, since a bag lists each distinct note of its folds."""
    if kept >= max(cardinalities):
        way = "as sets"
    else:
        way = "as codes" if kept == 0 else f"of more than {kept} levels as codes"
    return f"string columns {way} (best of {len(limits)} ways on its validation rows)"
