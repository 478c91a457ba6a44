"""`python -m tests.cluster.agent --kubeconfig .cluster/kubeconfig`: started by tests/cluster/controlplane.py."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from tests.cluster.agent.agent import Agent


def main() -> None:
    parser = argparse.ArgumentParser(description="tests/cluster node agent")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    Agent(args.kubeconfig).run()


if __name__ == "__main__":
    main()
