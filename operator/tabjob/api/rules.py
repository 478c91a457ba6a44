"""CEL rules (x-kubernetes-validations) the API server evaluates itself, in the same terms as the Python checks
beside the models they guard."""

from __future__ import annotations

from typing import Any

from pydantic import (
    JsonValue,
)

from tabjob.api.identity import MAX_FITS, MAX_LEADERBOARD_ROWS, OUTPUT_DIR
from tabjob.families import (
    FAMILIES,
    MODEL_KEYS,
)

# A GPU request is either whole or an exact fraction 1/k of one GPU (0.5, 0.25, 1/3, ...).
GPU_FRACTION_RULE: dict[str, Any] = {
    "rule": "!has(self.gpus) || self.gpus == double(int(self.gpus)) || (self.gpus < 1.0 && "
    "(1.0 / self.gpus) - double(int(1.0 / self.gpus + 0.5)) < 0.000001 && "
    "(1.0 / self.gpus) - double(int(1.0 / self.gpus + 0.5)) > -0.000001)",
    "message": "gpus must be a whole number or a fraction that divides one GPU (0.5, 0.25, 1/3, ...)",
    "fieldPath": ".gpus",
    "reason": "FieldValueInvalid",
}


# Without spec.models the preset fills them (within these limits, planner/presets.py); CEL's has() on a field of an
# absent object is an error ("no such key"), so the whole sum is guarded.
_CONFIGS = (
    "(has(self.models) ? "
    + " + ".join(f"(has(self.models.{key}) ? size(self.models.{key}) : 0)" for key in MODEL_KEYS)
    + " : 0)"
)
_HYPERPARAMETERS = "; ".join(f"{f.hyperparameters} for {f.key}" for f in FAMILIES.values())
_NAME_A_FAMILY = f"name at least one of {', '.join(MODEL_KEYS)} with a list of configs, e.g. {MODEL_KEYS[0]}: [{{}}]"
_TRIALS = "(has(self.tuning) && has(self.tuning.trials) ? self.tuning.trials : 1)"
_ENSEMBLE_ROW = "(!has(self.ensemble) || !has(self.ensemble.size) || self.ensemble.size > 0 ? 1 : 0)"
_FOLDS = (
    "(has(self.bagging) && has(self.bagging.folds) && self.bagging.folds >= 2 ? "
    "self.bagging.folds * (has(self.bagging.sets) ? self.bagging.sets : 1) : 1)"
)
SPEC_LIMIT_RULES: list[JsonValue] = [
    {
        "rule": f"!has(self.models) || {_CONFIGS} > 0",
        "message": _NAME_A_FAMILY,
        "fieldPath": ".models",
        "reason": "FieldValueRequired",
    },
    {
        "rule": f"({_CONFIGS}) * {_TRIALS} + {_ENSEMBLE_ROW} <= {MAX_LEADERBOARD_ROWS}",
        "message": f"the leaderboard (model configs x tuning.trials, plus the ensemble) would exceed the "
        f"{MAX_LEADERBOARD_ROWS} rows status.models holds; use fewer configs or trials",
        "fieldPath": ".tuning.trials",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": f"({_CONFIGS}) * {_TRIALS} * {_FOLDS} <= {MAX_FITS}",
        "message": f"fits (model configs x tuning.trials x bagging.folds x bagging.sets) would exceed the "
        f"limit of {MAX_FITS} per job; use fewer trials, folds or sets",
        "fieldPath": ".tuning.trials",
        "reason": "FieldValueInvalid",
    },
]

OUTPUT_PATH_RULE = (
    f"self.path == '{OUTPUT_DIR}' || (self.path.startsWith('{OUTPUT_DIR}/') && !self.path.contains('/../') "
    "&& !self.path.endsWith('/..'))"
)
