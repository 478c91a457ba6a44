"""``tabjob score RUN DATA --output OUT [--passthrough COL ...]``: a TabularPrediction's scoring, on this machine.

The same inputs and the same output as a TabularPrediction (docs/scoring.md): DATA's files and row groups split into
shards, one Parquet part file per shard under OUT (a directory, or an s3:// or gs:// prefix) with the passthrough
columns, ``prediction`` and ``proba_<class>`` (the columns of ``tabjob predict``), each committed whole, then
``_SUCCESS``. Run again on the same OUT, it skips the parts already committed. Exit 1 when the input is refused or a
shard failed (the others are committed; the error names the row and column).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("score", help="score a dataset with a finished run into Parquet part files (batch scoring)")
    p.add_argument("run", metavar="RUN", help="a finished run: a directory, or its s3:// or gs:// URI")
    p.add_argument("data", metavar="DATA", help="a CSV/Parquet file or dataset: a path, or an s3:// or gs:// prefix")
    p.add_argument("--output", "-o", required=True, help="a directory or an s3:// or gs:// prefix for the part files")
    p.add_argument("--passthrough", nargs="+", action="extend", default=[], metavar="COL",
                   help="columns of DATA copied into the output beside the predictions (an id, a key)")  # fmt: skip
    p.add_argument("--overwrite", action="store_true", help="replace a finished result already at OUTPUT")
    p.add_argument("--model", help="a leaderboard model instead of the best one")
    p.add_argument("--quiet", "-q", action="store_true", help="no line per shard")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # The trainer package holds the models; imported here so `import tabjob.cli` stays free of torch.
    from tabjob_trainer.errors import DataError
    from tabjob_trainer.scoring.local import score
    from tabjob_trainer.scoring.preflight import Request

    req = Request(
        model=args.run, data=args.data, output=args.output, passthrough=tuple(args.passthrough),
        overwrite=args.overwrite, model_name=args.model,
    )  # fmt: skip
    try:
        summary, store = score(req, log=not args.quiet)
    except DataError as exc:
        reason = getattr(exc, "reason", None)
        print(f"error: {exc}" + (f" ({reason})" if reason else ""), file=sys.stderr)
        return 1
    for failure in summary.failures:
        print(f"error: {failure.error}", file=sys.stderr)
    failed = summary.shards_failed
    print(
        f"scored {summary.rows_done} rows into {summary.shards_done} part file(s) under {store.uri}"
        + (f" ({summary.shards_skipped} already committed)" if summary.shards_skipped else "")
        + (f"; {failed} shard(s) failed, no _SUCCESS" if failed else "; wrote _SUCCESS")
    )
    return 1 if failed else 0
