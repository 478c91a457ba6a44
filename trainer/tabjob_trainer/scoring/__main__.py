"""`python -m tabjob_trainer.scoring`: one TabularPrediction pod. The operator's builders write these arguments.

Pod 0 runs the preflight and writes the plan; the others wait for it. Each then scores its shards, serving its
progress on --progress-port. Its last word is a `ScoringSummary` on standard output and in the termination message:
exit 0 when it went through its shards (failed shards are in the summary), 1 when it could not score at all.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tabjob_trainer.termination import write_message

if TYPE_CHECKING:
    from tabjob.contracts.scoring import ScoringSummary
    from tabjob_trainer.scoring.preflight import Request
    from tabjob_trainer.scoring.worker import Counters

# The scoring modules bring numpy, pandas and pyarrow: they are imported in the functions, so that the run again with
# LightGBM's library preloaded (the bottom of this file) happens before any of them has loaded.


def parse(argv: list[str] | None = None) -> tuple[Request, int, int | None]:
    from tabjob_trainer.scoring.preflight import Request

    p = argparse.ArgumentParser(prog="python -m tabjob_trainer.scoring")
    p.add_argument("--model", required=True, help="the run's URI")
    p.add_argument("--model-name", default=None)
    p.add_argument("--data", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--passthrough", action="append", default=[])
    p.add_argument("--parallelism", type=int, default=1)
    p.add_argument("--index", type=int, default=0, help="this pod's index, 0..parallelism-1")
    p.add_argument("--owner", required=True, help="the TabularPrediction's uid")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--progress-port", type=int, default=None)
    a = p.parse_args(argv)
    req = Request(
        model=a.model, data=a.data, output=a.output, passthrough=tuple(a.passthrough), parallelism=a.parallelism,
        owner=a.owner, overwrite=a.overwrite, model_name=a.model_name,
    )  # fmt: skip
    return req, a.index, a.progress_port


def main(argv: list[str] | None = None) -> int:
    from tabjob_trainer.errors import DataError
    from tabjob_trainer.scoring.preflight import ScoringError, preflight, wait_for_plan
    from tabjob_trainer.scoring.server import serve
    from tabjob_trainer.scoring.store import OutputStore
    from tabjob_trainer.scoring.worker import Counters, Scorer
    from tabjob_trainer.storage.filesystems import StorageError

    req, index, port = parse(argv)
    counters = Counters(pod=index)
    server = serve(port, counters.snapshot) if port else None
    try:
        store = OutputStore(req.output)
        plan = preflight(req, store)[0] if index == 0 else wait_for_plan(store, req.owner)
        summary = Scorer(plan, store, pod=index, counters=counters).run()
        code = 0
    except ScoringError as exc:
        summary, code = _refused(counters, str(exc), exc.reason), 1
    except StorageError as exc:
        reason = "OutputUnavailable" if exc.reason == "OutputUnavailable" else "DataUnavailable"
        summary, code = _refused(counters, str(exc), reason), 1
    except DataError as exc:
        summary, code = _refused(counters, str(exc), "InvalidData"), 1
    finally:
        if server is not None:
            server.shutdown()
    text = summary.for_termination()
    print(text, flush=True)
    write_message(text)
    return code


def _refused(counters: Counters, message: str, reason: str) -> ScoringSummary:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return counters.summary(False).model_copy(update={"error": message, "error_reason": reason})


if __name__ == "__main__":
    # As the training entry: LightGBM's library preloaded (preload.py), the process run again once before it scores.
    from tabjob_trainer.preload import run_again_with_lightgbm_preloaded

    run_again_with_lightgbm_preloaded()
    raise SystemExit(main())
