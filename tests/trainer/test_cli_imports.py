"""`tabjob run/predict/report` live in the control package, which must stay free of torch and lightgbm."""

from __future__ import annotations

import subprocess
import sys


def test_cli_modules_import_no_training_libraries() -> None:
    code = (
        "import sys, tabjob.cli, tabjob.cli.run, tabjob.cli.predict, tabjob.cli.report; "
        "tabjob.cli.build_parser(); "
        "print(','.join(m for m in ('torch', 'lightgbm', 'matplotlib', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_the_trainer_entry_loads_lightgbm_before_numpy() -> None:
    """`python -m tabjob_trainer` imports lightgbm (whose first act is loading lib_lightgbm.so) before numpy: a CUDA
    build of LightGBM crashed in every process that had loaded numpy first."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tabjob_trainer", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert done.index("lightgbm.libpath") < done.index("numpy"), [m for m in done if "lightgbm" in m or m == "numpy"]
