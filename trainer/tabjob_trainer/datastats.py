"""A table's metadata as the planner takes it (``tabjob.planner.DataStats``): read from its footers, no row read.

``python -m tabjob_trainer.datastats URI`` prints them as one JSON object: ``tabjob validate`` and ``tabjob plan``
run it in a child process, since the control side never imports pyarrow; on failure it prints one line naming the
URI and exits 1.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from tabjob.planner.sharding import DataStats
from tabjob_trainer.storage.structure import Dataset


def stats_of(dataset: Dataset) -> DataStats:
    """The planner's view of an opened dataset (pure)."""
    if dataset.format == "parquet":
        pieces = tuple(rows for f in dataset.files for rows in f.row_groups)
    else:
        pieces = tuple(f.size for f in dataset.files)
    return DataStats(
        format=dataset.format,
        columns=len(dataset.schema),
        pieces=pieces,
        rows=dataset.rows,
        stored_bytes=sum(f.size for f in dataset.files),
        uncompressed_bytes=dataset.uncompressed_bytes,
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tabjob_trainer.datastats URI", file=sys.stderr)
        return 2
    from tabjob_trainer.errors import DataError
    from tabjob_trainer.storage.datasets import open_dataset

    try:
        stats = stats_of(open_dataset(argv[0]))
    except (DataError, OSError) as exc:
        print(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, file=sys.stderr)
        return 1
    print(json.dumps(asdict(stats)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
