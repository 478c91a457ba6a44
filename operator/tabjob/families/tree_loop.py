"""The keys tabjob's own fit loop reads for the boosted trees, never passed to the library, with the values they take
(checked at plan time like a network's settings), and the patience the three families' defaults carry.

AutoGluon's trees wait at least 300 rounds after their best (fewer above 10,000 training rows) and 0.3 x the best
round + 20 once that is more (its adaptive early stopping); tabjob's waited a fixed 50 rounds and stopped its fold
models early. The trainer's rule is trainer/tabjob_trainer/models/patience.py; ``adaptive_patience: 0`` with
``early_stopping_rounds: 50`` is the fixed patience as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tabjob.families.network_settings import Setting

ADAPTIVE_PATIENCE = "adaptive_patience"
TREE_STOPPING: Mapping[str, Any] = {"early_stopping_rounds": 300, ADAPTIVE_PATIENCE: 0.3}

_ROUNDS = Setting("int", minimum=1)
_STOPPING: Mapping[str, Setting] = {
    "early_stopping_rounds": Setting("int", minimum=0),  # 0 trains every round
    ADAPTIVE_PATIENCE: Setting("number", minimum=0),
}
# A categorical column with more levels than this reaches the library as ordinal codes, not as a set of levels.
_NATIVE_LEVELS: Mapping[str, Setting] = {"max_native_levels": Setting("int", minimum=0)}
# LightGBM's fit also trains its string columns the other ways (all as sets, all as codes) and keeps the one that
# scores best on its validation rows; XGBoost's, where a column is over its limit, also all as sets (not all as
# codes: its limit's way is the one held-out table that favoured codes). A refit trains the way most folds kept.
COMPARE_LEVELS = "compare_native_levels"
LIGHTGBM_LOOP: Mapping[str, Setting] = {
    "num_boost_round": _ROUNDS,
    **_STOPPING,
    **_NATIVE_LEVELS,
    COMPARE_LEVELS: Setting("bool"),
}
CATBOOST_LOOP: Mapping[str, Setting] = _STOPPING  # its iteration count is CatBoost's own `iterations`
XGBOOST_LOOP: Mapping[str, Setting] = {
    "num_boost_round": _ROUNDS,
    **_STOPPING,
    "enable_categorical": Setting("bool"),
    **_NATIVE_LEVELS,
    COMPARE_LEVELS: Setting("bool"),
}
