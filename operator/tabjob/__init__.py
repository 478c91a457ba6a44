"""tabjob: a Kubernetes operator for tabular machine learning on GPUs (control side).

This package never imports torch or lightgbm: the operator image does not carry them. ``tabjob.Client`` (the
SDK) is loaded on first use, so ``import tabjob`` stays cheap for the CLI.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Client", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Client":
        from tabjob.client import Client

        return Client
    raise AttributeError(f"module 'tabjob' has no attribute {name!r}")
