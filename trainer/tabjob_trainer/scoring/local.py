"""`tabjob score` on this machine: every shard scored here, as one pod of one."""

from __future__ import annotations

import uuid

from tabjob.contracts.scoring import ScoringSummary
from tabjob_trainer.scoring.preflight import Request, preflight
from tabjob_trainer.scoring.store import OutputStore
from tabjob_trainer.scoring.worker import Scorer


def score(req: Request, log: bool = True) -> tuple[ScoringSummary, OutputStore]:
    """Score every shard here, as one pod of one (a ScoringError when the preflight refuses)."""
    if req.owner == "local":
        req = Request(**{**req.__dict__, "owner": f"local-{uuid.uuid4().hex[:12]}", "parallelism": 1})
    store = OutputStore(req.output)
    plan, _ = preflight(req, store)
    summary = Scorer(plan, store, pod=0, log=log).run()
    return summary, store
