"""``tabjob serve RUN_DIR [--name NAME] [--model NAME] [--port PORT] [--grpc-port P] [--metrics-port P]``.

Starts real MLServer on a finished run (a `tabjob run` directory, a TabularJob's output or a `tabjob export`),
speaking the Open Inference Protocol: ``POST /v2/models/NAME/infer`` on PORT (HTTP, default 8080), gRPC on
PORT+1 and Prometheus metrics on PORT+2 unless given. Stops on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve a finished run over the Open Inference Protocol (MLServer)")
    p.add_argument(
        "run_dir", metavar="RUN", help="a run: output directory of `tabjob run`, a job's output, an export, or a URI"
    )
    p.add_argument("--name", help="the model's name in /v2/models/NAME (default: the job's name)")
    p.add_argument("--model", help="a leaderboard model instead of the best one")
    p.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080)")
    p.add_argument("--grpc-port", type=int, help="gRPC port (default PORT+1)")
    p.add_argument("--metrics-port", type=int, help="Prometheus metrics port (default PORT+2)")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0, every interface)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tabjob_trainer.errors import DataError
    from tabjob_trainer.serving.serve import Ports, serve
    from tabjob_trainer.storage.run_reader import open_run

    try:
        ports = Ports.of(args.port, args.grpc_port, args.metrics_port)
        return serve(open_run(args.run_dir), args.name, args.model, ports, args.host)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
