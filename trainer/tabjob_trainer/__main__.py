"""``torchrun ... -m tabjob_trainer --spec SPEC --plan PLAN --output DIR`` (or TABJOB_SPEC/PLAN/OUTPUT)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from tabjob.contracts import pod
from tabjob_trainer.launch import mark_started


def main(argv: list[str] | None = None) -> int:
    # First, before the heavy imports: any exit from here on (a broken image included) is the trainer's.
    mark_started()
    # Where the preload is turned off (preload.py), LightGBM's library still loads before numpy and its friends.
    import lightgbm  # noqa: F401

    from tabjob_trainer.job import Inputs, run

    parser = argparse.ArgumentParser(prog="tabjob_trainer", description="Run a TabularJob plan's fits.")
    variables = {"spec": pod.SPEC, "plan": pod.PLAN, "output": pod.OUTPUT}
    parser.add_argument("--spec", default=pod.SPEC.get(), help="the TabularJob manifest or spec")
    parser.add_argument("--plan", default=pod.PLAN.get(), help="plan.json from the planner")
    parser.add_argument("--output", default=pod.OUTPUT.get(), help="output directory")
    args = parser.parse_args(argv)
    missing = [n for n in variables if not getattr(args, n)]
    if missing:
        parser.error(f"missing {', '.join('--' + m for m in missing)} (or {variables[missing[0]].name})")
    rank = pod.RANK.get_int(0)
    world = pod.WORLD_SIZE.get_int(1)
    local_rank = pod.LOCAL_RANK.get_int(0)
    return run(Inputs(Path(args.spec), Path(args.plan), Path(args.output)), rank, world, local_rank)


def exit_now(code: int) -> None:
    """Leave without the interpreter's teardown: every output is written and fsynced by then, and tearing down
    torch, its gloo group and the model libraries took 0.8 s of CPU per rank at the end of every job (seconds that
    count against a small table's time limit when runs are compared by wall time)."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    # LightGBM's library preloaded (preload.py): this process is run again once, same PID and command line, before
    # it has read anything or marked itself started.
    from tabjob_trainer.preload import run_again_with_lightgbm_preloaded

    run_again_with_lightgbm_preloaded()
    exit_now(main())
