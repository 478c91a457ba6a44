"""``tabjob predict RUN DATA [--output FILE] [--model NAME]``: predictions from a finished run, local or in a bucket.

The output (CSV, or Parquet for a .parquet name; a local file or an s3:// or gs:// object) has a ``prediction``
column (the label, decoded to its original values) and, for classification,
one ``proba_<class>`` column per class. The best model on the leaderboard is used unless ``--model`` names one.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("predict", help="predict new rows with a finished run's best model")
    p.add_argument(
        "run_dir",
        metavar="RUN",
        help="a run: output directory of `tabjob run`, a job's output, or its s3:// or gs:// URI",
    )
    p.add_argument(
        "data", metavar="DATA", help="CSV/Parquet file or dataset: a path, s3:// or gs:// URI, or sklearn://NAME"
    )
    p.add_argument(
        "--output",
        "-o",
        help="where to write: a .csv or .parquet file, or an s3:// or gs:// object (default RUN/predictions.csv; "
        "required for a run in object storage)",
    )
    p.add_argument("--model", help="a leaderboard model instead of the best one")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # The trainer package holds the models; imported here so `import tabjob.cli` stays free of torch.
    from tabjob_trainer.errors import DataError
    from tabjob_trainer.predictor import predict_file

    try:
        frame, target = predict_file(args.run_dir, args.data, args.output, args.model)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(frame)} predictions to {target}")
    return 0
