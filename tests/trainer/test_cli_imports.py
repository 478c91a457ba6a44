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
