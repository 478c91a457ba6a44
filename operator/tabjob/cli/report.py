"""``tabjob report RUN_DIR [--output DIR]``: charts a person would rather look at than read.

Writes leaderboard.png, learning_curves.png, feature_importance.png and an index.html showing them (default
RUN_DIR/report).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="charts of a finished run: leaderboard, learning curves, importance")
    p.add_argument("run_dir", metavar="RUN_DIR", help="output directory of `tabjob run` (or a job's output)")
    p.add_argument("--output", "-o", help="directory for the PNGs and index.html (default RUN_DIR/report)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not (Path(args.run_dir) / "leaderboard.json").exists():
        print(f"error: {args.run_dir}: not a finished tabjob run (leaderboard.json is missing)", file=sys.stderr)
        return 1
    from tabjob_trainer.report import write_report  # matplotlib stays out of `import tabjob.cli`

    target = write_report(args.run_dir, args.output)
    print(f"wrote {target / 'index.html'}")
    return 0
