"""Write operator/tabjob/families/lightgbm_parameters.py: every parameter name LightGBM accepts, aliases included.

The operator never imports LightGBM, yet the planner must refuse a parameter LightGBM would silently ignore (it
only warns, and tabjob trains it with verbose -1). So the names are generated from the installed LightGBM's own
dump (``LGBM_DumpParamAliases``) into a plain module; tests/trainer/test_registry.py fails when the installed
LightGBM's names differ from it. Run ``python -m hack.lightgbm_parameters`` after changing LightGBM's version.
"""

from __future__ import annotations

from pathlib import Path

import lightgbm
from lightgbm.basic import _ConfigAliases

from hack import parameter_names

TARGET = Path(__file__).resolve().parents[1] / "operator" / "tabjob" / "families" / "lightgbm_parameters.py"


def names() -> frozenset[str]:
    """LightGBM's parameters and every alias of each, from the library itself."""
    dump = _ConfigAliases._get_all_param_aliases()
    return frozenset(dump) | {alias for aliases in dump.values() for alias in aliases}


if __name__ == "__main__":
    parameter_names.write(TARGET, "LightGBM", lightgbm.__version__, names(), "from LightGBM's own dump")
