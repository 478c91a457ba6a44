"""``tabjob report RUN_DIR [--output DIR]``: charts a person would rather look at than read.

Writes leaderboard.png, learning_curves.png, feature_importance.png and an index.html showing them (default
RUN_DIR/report).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="charts of a finished run: leaderboard, learning curves, importance")
    p.add_argument(
        "run_dir",
        metavar="RUN",
        help="a run: output directory of `tabjob run`, a job's output, or its s3:// or gs:// URI",
    )
    p.add_argument(
        "--output", "-o", help="directory for the PNGs and index.html (default RUN/report; ./report-NAME for a URI)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tabjob_trainer.errors import DataError
    from tabjob_trainer.storage.filesystems import is_object_uri
    from tabjob_trainer.storage.run_reader import open_run, run_name

    try:
        run_dir = open_run(args.run_dir)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not (run_dir / "leaderboard.json").exists():
        print(f"error: {args.run_dir}: not a finished tabjob run (leaderboard.json is missing)", file=sys.stderr)
        return 1
    from tabjob_trainer.report import write_report  # matplotlib stays out of `import tabjob.cli`

    # A run read from a bucket is a cached copy: its report goes where the user is, not into the cache.
    output = args.output or (f"report-{run_name(args.run_dir)}" if is_object_uri(args.run_dir) else None)
    target = write_report(run_dir, output)
    print(f"wrote {target / 'index.html'}")
    return 0
