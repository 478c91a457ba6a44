"""Batch scoring: a dataset scored by a finished run's `Predictor`, sharded, one committed Parquet part per shard.

`tabjob score RUN DATA --output OUT` runs it on this machine (`score`), and a TabularPrediction's pods run it as
`python -m tabjob_trainer.scoring` (``__main__``), one share of the shards each. The pieces:

- ``shards``: pure: a dataset's pieces (row groups, CSV files) -> shards balanced by rows, assigned round-robin;
- ``store``: the output prefix, its plan and success marker, and the commit protocol;
- ``preflight``: the checks that fail the whole prediction before any row is scored, and pod 0's claim;
- ``worker``: one pod's share, scored with the Predictor loaded once, committed shard by shard;
- ``server``: the pod's progress endpoint (a ``ScoringProgress``) for the operator.
"""

from __future__ import annotations

import uuid

from tabjob.contracts.scoring import ScoringSummary
from tabjob_trainer.scoring.preflight import Request, preflight
from tabjob_trainer.scoring.store import OutputStore
from tabjob_trainer.scoring.worker import Scorer

__all__ = ["Request", "score"]


def score(req: Request, log: bool = True) -> tuple[ScoringSummary, OutputStore]:
    """Score every shard here, as one pod of one (a ScoringError when the preflight refuses)."""
    if req.owner == "local":
        req = Request(**{**req.__dict__, "owner": f"local-{uuid.uuid4().hex[:12]}", "parallelism": 1})
    store = OutputStore(req.output)
    plan, _ = preflight(req, store)
    summary = Scorer(plan, store, pod=0, log=log).run()
    return summary, store
